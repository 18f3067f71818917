"""Small fidelity gaps a probe against a real apiserver found: option validation,
integer extended resources, QoS after LimitRange defaulting, zero Job counters, and
when a suspended Job may change its scheduling directives."""

import pytest
from kubernetes import client

from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.apihelpers import job_manifest, status_body
from tests.kubesim.simhelpers import Clients, pod


def test_an_unknown_dry_run_value_is_refused_and_nothing_is_written(batch):
    with pytest.raises(client.ApiException) as error:
        batch.create_namespaced_job("default", job_manifest(suspend=True), dry_run="Foo")
    assert error.value.status == 422
    body = status_body(error.value)
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '[]string{"Foo"}: supported values: "All"'
    )
    assert body["details"]["causes"][0]["field"] == "dryRun"
    assert batch.list_namespaced_job("default").items == []


def test_dry_run_all_validates_without_writing(batch):
    created = batch.create_namespaced_job("default", job_manifest(suspend=True), dry_run="All")
    assert created.metadata.name == "train"
    assert batch.list_namespaced_job("default").items == []


def test_an_unknown_dry_run_value_on_delete_names_delete_options(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    with pytest.raises(client.ApiException) as error:
        batch.delete_namespaced_job("train", "default", dry_run="Foo")
    assert status_body(error.value)["message"].startswith('DeleteOptions.meta.k8s.io "" is invalid')
    assert batch.read_namespaced_job("train", "default").metadata.name == "train"


def pod_with_limits(name: str, limits: dict) -> dict:
    container = {"name": "main", "image": "busybox:1.36", "resources": {"limits": limits}}
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def test_a_fraction_of_a_gpu_is_invalid(core, batch):
    with pytest.raises(client.ApiException) as error:
        core.create_namespaced_pod("default", pod_with_limits("half", {"nvidia.com/gpu": "0.5"}))
    assert error.value.status == 422
    assert status_body(error.value)["message"] == (
        'Pod "half" is invalid: ['
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": '
        "must be an integer, "
        'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": '
        "must be an integer]"
    )
    job = job_manifest("half")
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1500m"}
    }
    with pytest.raises(client.ApiException) as error:
        batch.create_namespaced_job("default", job)
    assert error.value.status == 422
    assert (
        "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"
        in (status_body(error.value)["message"])
    )
    assert core.list_namespaced_pod("default").items == []


def test_whole_gpus_and_fractional_cpu_are_fine(core):
    manifest = pod_with_limits("ok", {"nvidia.com/gpu": "2", "cpu": "500m"})
    assert core.create_namespaced_pod("default", manifest).status.qos_class == "Burstable"


def test_job_status_omits_zero_counters(kubesim, batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    path = "/apis/batch/v1/namespaces/default/jobs/train/status"
    body = {"status": {"active": 0, "succeeded": 0, "failed": 0, "ready": 0, "terminating": 0}}
    patched = kubesim.store.patch("jobs", "default", "train", body, "merge", subresource="status")
    assert patched["status"] == {"ready": 0, "terminating": 0}  # pointers keep their 0
    raw = batch.api_client.call_api(*batch.api_client.param_serialize("GET", path))
    raw.read()
    assert b'"active"' not in raw.data and b'"succeeded"' not in raw.data


def started(kubesim, name="train"):
    """A suspended Job that ran once: its status carries a startTime."""
    stamp = kubesim.clock.timestamp()
    kubesim.store.patch(
        "jobs", "default", name, {"status": {"startTime": stamp}}, "merge", subresource="status"
    )


NEW_PLACEMENT = {
    "spec": {
        "template": {
            "metadata": {"labels": {"placed": "yes"}, "annotations": {"a": "b"}},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "schedulingGates": [{"name": "example.com/window"}],
            },
        }
    }
}


def test_a_never_started_suspended_job_may_change_its_scheduling_directives(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    patched = batch.patch_namespaced_job("train", "default", NEW_PLACEMENT)
    assert patched.spec.template.spec.node_selector == {"nvidia.com/gpu.product": "NVIDIA-L4"}
    assert patched.spec.template.metadata.labels["placed"] == "yes"


def test_a_suspended_job_that_started_may_not(kubesim, batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    started(kubesim)
    with pytest.raises(client.ApiException) as error:
        batch.patch_namespaced_job("train", "default", NEW_PLACEMENT)
    assert error.value.status == 422
    body = status_body(error.value)
    assert body["message"].startswith('Job.batch "train" is invalid: spec.template: Invalid value:')
    assert body["message"].endswith("field is immutable")
    assert batch.read_namespaced_job("train", "default").spec.template.spec.node_selector is None


def test_a_running_job_may_not_change_its_template(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=False))
    with pytest.raises(client.ApiException) as error:
        batch.patch_namespaced_job("train", "default", NEW_PLACEMENT)
    assert error.value.status == 422


def test_a_suspended_job_may_not_change_anything_else_in_its_template(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    image = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x:2"}]}}}}
    with pytest.raises(client.ApiException) as error:
        batch.patch_namespaced_job("train", "default", image)
    assert error.value.status == 422


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def test_qos_class_is_computed_after_limitrange_defaults(k):
    ns = k.namespace()
    k.core.create_namespaced_limit_range(
        ns,
        {
            "metadata": {"name": "defaults"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
        },
    )
    created = k.core.create_namespaced_pod(ns, pod("defaulted"))
    assert created.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert created.status.qos_class == "Guaranteed"
    limits_only = pod("burst")
    limits_only["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    assert k.core.create_namespaced_pod(ns, limits_only).status.qos_class == "Burstable"
