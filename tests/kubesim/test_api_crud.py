"""Create, read, update and delete every kind through the official client."""

import pytest
from kubernetes import client

from tests.kubesim.apihelpers import job_manifest, quota_manifest, status_body


def test_it_seeds_namespaces_and_builtin_cluster_roles(core, rbac):
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    default = core.read_namespace("default")
    assert default.status.phase == "Active"
    assert default.metadata.labels["kubernetes.io/metadata.name"] == "default"
    roles = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"admin", "edit", "view"} <= roles


def test_cluster_roles_and_their_bindings_are_read_and_written(rbac):
    rule = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
    rbac.create_cluster_role({"metadata": {"name": "reader"}, "rules": [rule]})
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "portal"}],
    }
    rbac.create_cluster_role_binding(binding)
    assert rbac.read_cluster_role_binding("reader").role_ref.name == "reader"
    with pytest.raises(client.ApiException) as error:  # a ClusterRoleBinding grants cluster roles
        rbac.create_cluster_role_binding(
            {
                **binding,
                "metadata": {"name": "x"},
                "roleRef": {**binding["roleRef"], "kind": "Role"},
            }
        )
    assert error.value.status == 422
    rbac.delete_cluster_role("reader")
    assert "reader" not in {r.metadata.name for r in rbac.list_cluster_role().items}


def test_job_gets_the_defaults_a_real_apiserver_sets(batch):
    job = batch.create_namespaced_job("default", job_manifest(gpus=1))
    spec = job.spec
    assert (spec.backoff_limit, spec.completions, spec.parallelism) == (6, 1, 1)
    assert spec.completion_mode == "NonIndexed"
    assert spec.suspend is False
    assert spec.pod_replacement_policy == "TerminatingOrFailed"
    uid = job.metadata.uid
    assert spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    labels = spec.template.metadata.labels
    assert labels["controller-uid"] == uid
    assert labels["batch.kubernetes.io/job-name"] == "train"
    container = spec.template.spec.containers[0]
    assert container.termination_message_path == "/dev/termination-log"
    assert container.image_pull_policy == "IfNotPresent"
    assert container.resources.requests == {"nvidia.com/gpu": "1"}
    assert spec.template.spec.dns_policy == "ClusterFirst"
    assert spec.template.spec.scheduler_name == "default-scheduler"
    assert job.metadata.generation == 1
    assert int(job.metadata.resource_version) > 0
    assert job.metadata.creation_timestamp.tzinfo is not None


def test_pod_crud_with_defaults(core):
    pod = core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    assert pod.status.phase in ("Pending", "Running")
    assert pod.spec.restart_policy == "Always"
    assert pod.spec.termination_grace_period_seconds == 30
    assert pod.spec.containers[0].image_pull_policy == "Always"
    assert pod.status.qos_class == "BestEffort"
    pod.metadata.labels["tier"] = "front"
    updated = core.replace_namespaced_pod("web", "default", pod)
    assert updated.metadata.labels["tier"] == "front"
    assert int(updated.metadata.resource_version) > int(pod.metadata.resource_version)
    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert "web" in names
    core.delete_namespaced_pod("web", "default")
    with pytest.raises(client.ApiException) as error:
        core.read_namespaced_pod("web", "default")
    assert error.value.status == 404


def test_job_update_bumps_generation_only_on_spec_change(batch):
    job = batch.create_namespaced_job("default", job_manifest(suspend=True))
    job.metadata.labels = {"team": "a"}
    relabelled = batch.replace_namespaced_job("train", "default", job)
    assert relabelled.metadata.generation == 1
    relabelled.spec.backoff_limit = 2
    changed = batch.replace_namespaced_job("train", "default", relabelled)
    assert changed.metadata.generation == 2
    assert changed.spec.backoff_limit == 2


def test_update_without_changes_writes_nothing(batch):
    job = batch.create_namespaced_job("default", job_manifest(suspend=True))
    again = batch.replace_namespaced_job("train", "default", job)
    assert again.metadata.resource_version == job.metadata.resource_version


def test_status_subresource_changes_only_status(batch):
    job = batch.create_namespaced_job("default", job_manifest(suspend=True))
    job.status = client.V1JobStatus(failed=0, succeeded=0, active=0)
    job.spec.backoff_limit = 1
    updated = batch.replace_namespaced_job_status("train", "default", job)
    assert updated.spec.backoff_limit == 6
    assert updated.status.active is None  # a zero counter is omitted, as Go's encoder does
    assert updated.metadata.generation == 1


def test_quota_and_limit_range_crud(core):
    quota = core.create_namespaced_resource_quota("default", quota_manifest())
    assert quota.spec.hard == {"requests.nvidia.com/gpu": "4"}
    assert core.read_namespaced_resource_quota("gpu", "default").metadata.uid == quota.metadata.uid
    limit_range = core.create_namespaced_limit_range(
        "default",
        {
            "metadata": {"name": "limits"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]},
        },
    )
    assert limit_range.spec.limits[0].default == {"cpu": "500m"}
    core.delete_namespaced_limit_range("limits", "default")
    core.delete_namespaced_resource_quota("gpu", "default")
    assert core.list_namespaced_resource_quota("default").items == []


def test_rbac_crud(rbac):
    rbac.create_namespaced_role(
        "default",
        {
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        },
    )
    binding = rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "alice-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [
                {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        },
    )
    assert binding.role_ref.name == "reader"
    assert [r.metadata.name for r in rbac.list_namespaced_role("default").items] == ["reader"]
    rbac.delete_namespaced_role_binding("alice-reads", "default")
    rbac.delete_namespaced_role("reader", "default")


def test_network_policy_crud(networking):
    policy = networking.create_namespaced_network_policy(
        "default",
        {"metadata": {"name": "deny-all"}, "spec": {"podSelector": {}}},
    )
    assert policy.spec.policy_types == ["Ingress"]
    networking.delete_namespaced_network_policy("deny-all", "default")


def test_events_and_nodes_are_served(core):
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"},
            "reason": "Tested",
            "message": "hello",
            "type": "Normal",
        },
    )
    assert core.read_namespaced_event("e1", "default").reason == "Tested"
    assert isinstance(core.list_node().items, list)


def test_generate_name(core):
    pod = core.create_namespaced_pod(
        "default",
        {
            "metadata": {"generateName": "worker-"},
            "spec": {"containers": [{"name": "c", "image": "x:1"}]},
        },
    )
    assert pod.metadata.name.startswith("worker-")
    assert len(pod.metadata.name) == len("worker-") + 5


def test_pod_log(kubesim, core):
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}},
    )
    kubesim.store.append_log("default", "p", "line one\nline two\n")
    assert core.read_namespaced_pod_log("p", "default").endswith("line two\n")
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "line two\n"


def test_a_pods_log_goes_with_it(kubesim, core):
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    core.create_namespaced_pod("default", pod)
    kubesim.store.append_log("default", "p", "the first pod's output\n")
    core.delete_namespaced_pod("p", "default")

    core.create_namespaced_pod("default", pod)
    assert core.read_namespaced_pod_log("p", "default") == ""


def test_dry_run_stores_nothing(batch):
    created = batch.create_namespaced_job("default", job_manifest(), dry_run="All")
    assert created.metadata.name == "train"
    with pytest.raises(client.ApiException) as error:
        batch.read_namespaced_job("train", "default")
    assert status_body(error.value)["reason"] == "NotFound"
