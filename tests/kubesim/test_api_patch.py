"""Merge, strategic merge and JSON patch, and server-side apply with field ownership."""

import json

import pytest
import yaml
from kubernetes import client

from kubesim.apiserver.patch import strategic_merge
from tests.kubesim.apihelpers import job_manifest, quota_manifest, status_body

QUOTA_PATH = "/api/v1/namespaces/default/resourcequotas/gpu"


def apply(api, path, manifest, manager="portal", force=False):
    """Server-side apply through the generic client, as the portal's client module does."""
    query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
    response = api.call_api(
        *api.param_serialize(
            "PATCH",
            path,
            query_params=query,
            header_params={
                "Content-Type": "application/apply-patch+yaml",
                "Accept": "application/json",
            },
            body=yaml.safe_dump(manifest),
        )
    )
    response.read()
    if response.status >= 400:
        raise client.ApiException(http_resp=response)
    return response.status, json.loads(response.data)


def test_merge_patch(core):
    core.create_namespaced_resource_quota(
        "default", quota_manifest(hard={"pods": "10", "cpu": "4"})
    )
    patched = core.patch_namespaced_resource_quota(
        "gpu",
        "default",
        {"spec": {"hard": {"cpu": None, "memory": "1Gi"}}},
        _content_type="application/merge-patch+json",
    )
    assert patched.spec.hard == {"pods": "10", "memory": "1Gi"}


def test_strategic_merge_patch_merges_containers_by_name(core):
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {
                "containers": [
                    {"name": "main", "image": "app:1"},
                    {"name": "side", "image": "side:1"},
                ]
            },
        },
    )
    patched = core.patch_namespaced_pod(
        "p",
        "default",
        {
            "metadata": {"labels": {"b": "2"}},
            "spec": {"containers": [{"name": "main", "image": "app:2"}]},
        },
    )  # the client's default content type for a dict body is strategic merge
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "app:2"),
        ("side", "side:1"),
    ]
    assert patched.metadata.labels == {"a": "1", "b": "2"}


def test_strategic_merge_keys_and_directives():
    original = {
        "spec": {
            "containers": [
                {"name": "main", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
            ],
            "tolerations": [{"key": "x"}],
            "finalizers": ["a"],
        }
    }
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "env": [{"name": "A", "$patch": "delete"}, {"name": "C", "value": "3"}],
                }
            ],
            "$setElementOrder/containers": [{"name": "main"}],
            "tolerations": [{"key": "y"}],
            "finalizers": ["b"],
        }
    }
    merged = strategic_merge(original, patch)
    assert merged["spec"]["containers"][0]["env"] == [
        {"name": "B", "value": "2"},
        {"name": "C", "value": "3"},
    ]
    assert merged["spec"]["tolerations"] == [{"key": "y"}]  # atomic list: replaced
    assert merged["spec"]["finalizers"] == ["a", "b"]  # merged primitive list
    assert strategic_merge({"a": {"b": 1, "c": 2}}, {"a": {"$patch": "replace", "c": 3}}) == {
        "a": {"c": 3}
    }


def test_json_patch(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    patched = batch.patch_namespaced_job(
        "train",
        "default",
        [
            {"op": "replace", "path": "/spec/suspend", "value": False},
            {"op": "add", "path": "/metadata/labels/team", "value": "a"},
        ],
        _content_type="application/json-patch+json",
    )
    assert patched.spec.suspend is False
    assert patched.metadata.labels == {"team": "a"}
    assert patched.metadata.generation == 2


def test_json_patch_test_failure_is_rejected(batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    with pytest.raises(client.ApiException) as error:
        batch.patch_namespaced_job(
            "train",
            "default",
            [
                {"op": "test", "path": "/spec/suspend", "value": False},
                {"op": "replace", "path": "/spec/suspend", "value": False},
            ],
            _content_type="application/json-patch+json",
        )
    assert error.value.status == 422
    body = status_body(error.value)
    assert body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert batch.read_namespaced_job("train", "default").spec.suspend is True


def test_json_patch_that_does_not_decode_is_a_bad_request(api, batch):
    batch.create_namespaced_job("default", job_manifest(suspend=True))
    response = api.call_api(
        *api.param_serialize(
            "PATCH",
            "/apis/batch/v1/namespaces/default/jobs/train",
            header_params={"Content-Type": "application/json-patch+json"},
            body=["not an op"],
        )
    )
    response.read()
    assert response.status == 400
    assert json.loads(response.data)["message"] == (
        "json: cannot unmarshal string into Go value of type jsonpatch.Operation"
    )


def test_apply_creates_then_an_identical_apply_writes_nothing(kubesim, api):
    status, created = apply(api, QUOTA_PATH, quota_manifest())
    assert status == 201
    assert created["metadata"]["managedFields"][0]["manager"] == "portal"
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"
    kubesim.request_log.clear()
    status, again = apply(api, QUOTA_PATH, quota_manifest())
    assert status == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert kubesim.store.resource_version == created["metadata"]["resourceVersion"]


def test_apply_changes_and_removes_fields_it_no_longer_sets(api):
    apply(api, QUOTA_PATH, quota_manifest(hard={"requests.nvidia.com/gpu": "4", "pods": "20"}))
    _, updated = apply(api, QUOTA_PATH, quota_manifest(hard={"requests.nvidia.com/gpu": "8"}))
    assert updated["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}


def test_apply_conflicts_with_another_manager_unless_forced(api):
    apply(api, QUOTA_PATH, quota_manifest(), manager="portal")
    with pytest.raises(client.ApiException) as error:
        apply(api, QUOTA_PATH, quota_manifest(hard={"requests.nvidia.com/gpu": "2"}), manager="ops")
    body = status_body(error.value)
    assert error.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "portal": .spec.hard.requests.nvidia.com/gpu'
    )
    assert body["details"]["causes"][0]["field"] == ".spec.hard.requests.nvidia.com/gpu"
    _, forced = apply(
        api,
        QUOTA_PATH,
        quota_manifest(hard={"requests.nvidia.com/gpu": "2"}),
        manager="ops",
        force=True,
    )
    assert forced["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    managers = {e["manager"] for e in forced["metadata"]["managedFields"]}
    assert managers == {"ops"}


def test_apply_with_the_same_value_shares_ownership(api):
    apply(api, QUOTA_PATH, quota_manifest(), manager="portal")
    _, shared = apply(api, QUOTA_PATH, quota_manifest(), manager="ops")
    assert {e["manager"] for e in shared["metadata"]["managedFields"]} == {"portal", "ops"}


def test_apply_conflicts_with_an_update_manager(core, api):
    core.create_namespaced_resource_quota("default", quota_manifest())
    with pytest.raises(client.ApiException) as error:
        apply(api, QUOTA_PATH, quota_manifest(hard={"requests.nvidia.com/gpu": "9"}))
    assert '"OpenAPI-Generator" using v1' in status_body(error.value)["message"]


def test_apply_merges_containers_by_name(api):
    path = "/apis/batch/v1/namespaces/default/jobs/train"
    _, job = apply(api, path, job_manifest(suspend=True))
    assert job["spec"]["template"]["spec"]["containers"][0]["name"] == "main"
    assert job["spec"]["suspend"] is True
    manifest = job_manifest(suspend=False)
    _, resumed = apply(api, path, manifest)
    assert resumed["spec"]["suspend"] is False
    assert resumed["metadata"]["generation"] == 2


def test_apply_needs_a_field_manager(kubesim):
    from tests.kubesim.apihelpers import sim_request

    status, _, payload = sim_request(kubesim, "PATCH", QUOTA_PATH, quota_manifest())
    assert status == 415  # JSON body sent as application/json: not a patch type
