"""Error responses: Status bodies with the codes, reasons and messages of a real apiserver."""

import pytest
from kubernetes import client

from kubesim.apiserver.errors import Forbidden
from tests.kubesim.apihelpers import job_manifest, quota_manifest, sim_request, status_body


def _error(call, *args, **kwargs):
    with pytest.raises(client.ApiException) as error:
        call(*args, **kwargs)
    return error.value, status_body(error.value)


def test_not_found(batch):
    exc, body = _error(batch.read_namespaced_job, "ghost", "default")
    assert exc.status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'jobs.batch "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "group": "batch", "kind": "jobs"},
        "code": 404,
    }


def test_create_in_missing_namespace_is_not_found(core):
    exc, body = _error(core.create_namespaced_resource_quota, "nowhere", quota_manifest())
    assert exc.status == 404
    assert body["message"] == 'namespaces "nowhere" not found'


def test_already_exists(batch):
    batch.create_namespaced_job("default", job_manifest())
    exc, body = _error(batch.create_namespaced_job, "default", job_manifest())
    assert exc.status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'jobs.batch "train" already exists'


def test_stale_update_conflicts(batch):
    job = batch.create_namespaced_job("default", job_manifest(suspend=True))
    fresh = batch.read_namespaced_job("train", "default")
    fresh.spec.backoff_limit = 3
    batch.replace_namespaced_job("train", "default", fresh)
    job.spec.backoff_limit = 4
    exc, body = _error(batch.replace_namespaced_job, "train", "default", job)
    assert exc.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on jobs.batch "train": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_invalid_name(batch):
    exc, body = _error(batch.create_namespaced_job, "default", job_manifest(name="Bad_Name"))
    assert exc.status == 422
    assert body["reason"] == "Invalid"
    assert body["message"].startswith(
        'Job.batch "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain must consist of"
    )
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "message": body["details"]["causes"][0]["message"],
        "field": "metadata.name",
    }
    assert body["details"]["kind"] == "Job"


def test_namespace_names_are_dns_labels(core):
    exc, body = _error(core.create_namespace, {"metadata": {"name": "team.a"}})
    assert exc.status == 422
    assert "RFC 1123 label" in body["message"]


def test_job_pod_template_may_not_restart_always(batch):
    exc, body = _error(
        batch.create_namespaced_job, "default", job_manifest(restart_policy="Always")
    )
    assert exc.status == 422
    assert body["message"] == (
        'Job.batch "train" is invalid: spec.template.spec.restartPolicy: '
        'Unsupported value: "Always": supported values: "OnFailure", "Never"'
    )


def test_missing_required_fields_are_all_reported(core):
    exc, body = _error(
        core.create_namespaced_pod,
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}], "restartPolicy": "Sometimes"},
        },
    )
    assert exc.status == 422
    fields = [cause["field"] for cause in body["details"]["causes"]]
    assert fields == ["spec.containers[0].image", "spec.restartPolicy"]
    assert body["message"].startswith(
        'Pod "p" is invalid: [spec.containers[0].image: Required value'
    )


def test_wrong_type_is_invalid(kubesim):
    job = job_manifest()
    job["spec"]["backoffLimit"] = "six"
    status, _, payload = sim_request(kubesim, "POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 422
    assert b"spec.backoffLimit in body must be of type integer" in payload


def test_bad_quantity_is_invalid(core):
    exc, body = _error(
        core.create_namespaced_resource_quota,
        "default",
        quota_manifest(hard={"requests.nvidia.com/gpu": "lots"}),
    )
    assert exc.status == 422
    assert body["details"]["causes"][0]["field"] == "spec.hard[requests.nvidia.com/gpu]"


def test_gpu_requests_must_equal_limits(core):
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x:1",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "2"},
                        "requests": {"nvidia.com/gpu": "1"},
                    },
                }
            ]
        },
    }
    exc, body = _error(core.create_namespaced_pod, "default", pod)
    assert exc.status == 422
    assert "must be equal to nvidia.com/gpu limit of 2" in body["message"]


def test_job_template_is_immutable(batch):
    job = batch.create_namespaced_job("default", job_manifest())
    job.spec.template.spec.containers[0].image = "busybox:2"
    exc, body = _error(batch.replace_namespaced_job, "train", "default", job)
    assert exc.status == 422
    assert "spec.template: Invalid value" in body["message"]
    assert body["message"].endswith("field is immutable")


def test_role_ref_is_immutable(rbac):
    rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "b"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    binding = rbac.read_namespaced_role_binding("b", "default")
    binding.role_ref.name = "edit"
    exc, body = _error(rbac.replace_namespaced_role_binding, "b", "default", binding)
    assert exc.status == 422
    assert (
        "roleRef: Invalid value" in body["message"] and "cannot change roleRef" in body["message"]
    )


def test_role_binding_needs_a_role_ref(kubesim):
    status, _, payload = sim_request(
        kubesim,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        {"metadata": {"name": "b"}, "subjects": []},
    )
    assert status == 422
    assert b"roleRef" in payload


def test_name_mismatch_with_url_is_bad_request(batch):
    batch.create_namespaced_job("default", job_manifest())
    job = batch.read_namespaced_job("train", "default")
    exc, body = _error(batch.replace_namespaced_job, "other", "default", job)
    assert exc.status == 400
    assert (
        body["message"]
        == "the name of the object (train) does not match the name on the URL (other)"
    )


def test_admission_forbidden(kubesim, core):
    def deny(operation, obj, old, store):
        raise Forbidden(
            resource="pods",
            name=obj["metadata"]["name"],
            message="exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, "
            "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4",
        )

    kubesim.store.add_admission("pods", deny)
    exc, body = _error(
        core.create_namespaced_pod,
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}},
    )
    assert exc.status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"].startswith('pods "p" is forbidden: exceeded quota: gpu')


def test_unknown_path_is_404(kubesim):
    status, _, _ = sim_request(kubesim, "GET", "/apis/apps/v1/namespaces/default/daemonsets")
    assert status == 404
