"""Deletion: propagation to dependents and namespace cascades."""

import json

import pytest
from kubernetes import client

from tests.kubesim.apihelpers import job_manifest, quota_manifest, sim_request


def owned_pod(job, name):
    return {
        "metadata": {
            "name": name,
            "labels": {"job-name": job.metadata.name},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job.metadata.name,
                    "uid": job.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x:1"}]},
    }


@pytest.fixture
def job_with_pods(core, batch):
    job = batch.create_namespaced_job("default", job_manifest(suspend=True))
    for name in ("train-1", "train-2"):
        core.create_namespaced_pod("default", owned_pod(job, name))
    return job


def pod_names(core):
    return sorted(p.metadata.name for p in core.list_namespaced_pod("default").items)


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_deleting_a_job_deletes_its_pods(core, batch, job_with_pods, policy):
    batch.delete_namespaced_job("train", "default", propagation_policy=policy)
    assert pod_names(core) == []


def test_deleting_a_job_with_orphan_keeps_pods_without_owner(core, batch, job_with_pods):
    batch.delete_namespaced_job("train", "default", propagation_policy="Orphan")
    pods = core.list_namespaced_pod("default").items
    assert sorted(p.metadata.name for p in pods) == ["train-1", "train-2"]
    assert all(p.metadata.owner_references is None for p in pods)


def test_jobs_orphan_by_default_like_batch_v1(core, batch, job_with_pods):
    batch.delete_namespaced_job("train", "default")
    assert pod_names(core) == ["train-1", "train-2"]


def test_propagation_policy_in_delete_options_body(core, batch, job_with_pods):
    batch.delete_namespaced_job(
        "train", "default", body=client.V1DeleteOptions(propagation_policy="Background")
    )
    assert pod_names(core) == []


def test_deleting_a_namespace_deletes_everything_in_it(core, batch):
    core.create_namespace({"metadata": {"name": "team-a"}})
    batch.create_namespaced_job("team-a", job_manifest(suspend=True))
    core.create_namespaced_resource_quota("team-a", quota_manifest())
    deleted = core.delete_namespace("team-a")
    assert deleted["status"]["phase"] == "Terminating"
    with pytest.raises(client.ApiException) as error:
        core.read_namespace("team-a")
    assert error.value.status == 404
    assert batch.list_job_for_all_namespaces().items == []
    assert core.list_resource_quota_for_all_namespaces().items == []


def test_delete_collection(core):
    for name in ("a", "b"):
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": name, "labels": {"batch": "1"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        )
    core.delete_collection_namespaced_pod("default", label_selector="batch=1")
    assert pod_names(core) == []


def test_delete_missing_is_not_found(batch):
    with pytest.raises(client.ApiException) as error:
        batch.delete_namespaced_job("ghost", "default")
    assert error.value.status == 404


def _deleted(kubesim, path):
    code, _, body = sim_request(kubesim, "DELETE", path)
    assert code == 200
    return json.loads(body)


def test_an_object_deleted_at_once_answers_a_status_as_kube_apiserver_does(core, kubesim):
    made = core.create_namespaced_limit_range("default", {"metadata": {"name": "l"}})
    answer = _deleted(kubesim, "/api/v1/namespaces/default/limitranges/l")
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "l", "kind": "limitranges", "uid": made.metadata.uid},
    }


def test_the_status_names_the_group(batch, kubesim):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    answer = _deleted(kubesim, "/apis/batch/v1/namespaces/default/jobs/train?dryRun=All")
    assert answer["kind"] == "Job"  # batch/v1 orphans by default: the collector's finalizer
    assert answer["metadata"]["finalizers"] == ["orphan"]
    answer = _deleted(
        kubesim, "/apis/batch/v1/namespaces/default/jobs/train?propagationPolicy=Background"
    )
    assert answer["details"]["group"] == "batch"
    assert answer["details"]["kind"] == "jobs"


def test_pods_namespaces_and_quotas_answer_the_object(core, kubesim):
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    core.create_namespaced_resource_quota("default", quota_manifest())
    pod = _deleted(kubesim, "/api/v1/namespaces/default/pods/p")
    assert pod["kind"] == "Pod" and pod["metadata"]["deletionTimestamp"]
    quota = _deleted(kubesim, "/api/v1/namespaces/default/resourcequotas/gpu")
    assert quota["kind"] == "ResourceQuota" and "deletionTimestamp" not in quota["metadata"]
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert _deleted(kubesim, "/api/v1/namespaces/team-a")["kind"] == "Namespace"


def test_an_object_kept_by_a_finalizer_answers_the_object(core, kubesim):
    core.create_namespaced_limit_range(
        "default", {"metadata": {"name": "l", "finalizers": ["example.com/keep"]}}
    )
    answer = _deleted(kubesim, "/api/v1/namespaces/default/limitranges/l")
    assert answer["kind"] == "LimitRange"
    assert answer["metadata"]["deletionTimestamp"]


def test_events_ignore_orphan(core, kubesim):
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R",
            "message": "m",
            "type": "Normal",
        },
    )
    path = "/api/v1/namespaces/default/events/e?propagationPolicy=Orphan"
    assert _deleted(kubesim, path)["kind"] == "Status"
