"""ResourceQuota admission and status, LimitRange defaulting (over HTTP, real client)."""

import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import Clients, error_body, pod, wait_for


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def gpu_quota(k, ns, gpus="2", **extra):
    hard = {"requests.nvidia.com/gpu": gpus, **extra}
    return k.core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "team-gpus"}, "spec": {"hard": hard}}
    )


def used(k, ns, name="team-gpus"):
    return k.core.read_namespaced_resource_quota(name, ns).status.used


def test_it_rejects_a_pod_over_quota_with_the_apiservers_message(k):
    ns = k.namespace()
    gpu_quota(k, ns)
    k.core.create_namespaced_pod(ns, pod("first", gpus=2))
    with pytest.raises(ApiException) as caught:
        k.core.create_namespaced_pod(ns, pod("x", gpus=1))
    assert caught.value.status == 403
    body = error_body(caught.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "x" is forbidden: exceeded quota: team-gpus, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )


def test_it_keeps_status_hard_and_used_current(k):
    ns = k.namespace()
    created = gpu_quota(k, ns, gpus="4", pods="10")
    assert created.status.hard == {"requests.nvidia.com/gpu": "4", "pods": "10"}
    assert created.status.used == {"requests.nvidia.com/gpu": "0", "pods": "0"}
    k.core.create_namespaced_pod(ns, pod("a", gpus=1))
    k.core.create_namespaced_pod(ns, pod("b", gpus=2))
    assert wait_for(lambda: used(k, ns) == {"requests.nvidia.com/gpu": "3", "pods": "2"})


def test_finished_pods_do_not_count(k):
    ns = k.namespace()
    gpu_quota(k, ns, gpus="1")
    short = pod("short", gpus=1, annotations={"kubesim.io/duration": "30s"})
    k.core.create_namespaced_pod(ns, short)
    wait_for(lambda: k.core.read_namespaced_pod("short", ns).status.phase == "Running")
    k.advance(31)
    wait_for(lambda: k.core.read_namespaced_pod("short", ns).status.phase == "Succeeded")
    assert wait_for(lambda: used(k, ns) == {"requests.nvidia.com/gpu": "0"})
    k.core.create_namespaced_pod(ns, pod("next", gpus=1))  # the GPU is free again


def test_cpu_and_memory_sums_use_kubernetes_units(k):
    ns = k.namespace()
    k.core.create_namespaced_resource_quota(
        ns,
        {
            "metadata": {"name": "compute"},
            "spec": {"hard": {"requests.cpu": "2", "requests.memory": "8Gi", "limits.cpu": "4"}},
        },
    )
    for name in ("a", "b", "c"):
        manifest = pod(name)
        manifest["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
        k.core.create_namespaced_pod(ns, manifest)
    expected = {"requests.cpu": "1500m", "requests.memory": "3Gi", "limits.cpu": "3"}
    assert wait_for(lambda: used(k, ns, "compute") == expected)


def test_a_cpu_quota_needs_requests_unless_a_limitrange_defaults_them(k):
    ns = k.namespace()
    k.core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "4"}}}
    )
    with pytest.raises(ApiException) as caught:
        k.core.create_namespaced_pod(ns, pod("bare"))
    assert caught.value.status == 403
    assert error_body(caught.value)["message"] == (
        'pods "bare" is forbidden: failed quota: compute: must specify requests.cpu for: main'
    )
    k.core.create_namespaced_limit_range(
        ns,
        {
            "metadata": {"name": "defaults"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
        },
    )
    created = k.core.create_namespaced_pod(ns, pod("defaulted"))
    resources = created.spec.containers[0].resources
    assert resources.limits == {"cpu": "1", "memory": "1Gi"}
    assert resources.requests == {"cpu": "1", "memory": "1Gi"}  # defaultRequest <- default


def test_limitrange_default_request_and_explicit_values_win(k):
    ns = k.namespace()
    k.core.create_namespaced_limit_range(
        ns,
        {
            "metadata": {"name": "defaults"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "2", "memory": "4Gi"},
                        "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                        "max": {"cpu": "8"},
                    }
                ]
            },
        },
    )
    stored = k.core.read_namespaced_limit_range("defaults", ns)
    assert stored.spec.limits[0].default_request == {"cpu": "250m", "memory": "512Mi"}
    manifest = pod("mixed")
    manifest["spec"]["containers"][0]["resources"] = {"limits": {"memory": "1Gi"}}
    resources = k.core.create_namespaced_pod(ns, manifest).spec.containers[0].resources
    assert resources.limits == {"cpu": "2", "memory": "1Gi"}
    assert resources.requests == {"cpu": "250m", "memory": "1Gi"}
    too_big = pod("huge", cpu="16")
    with pytest.raises(ApiException) as caught:
        k.core.create_namespaced_pod(ns, too_big)
    assert error_body(caught.value)["message"] == (
        'pods "huge" is forbidden: maximum cpu usage per Container is 8, but limit is 16'
    )


def test_extended_resource_requests_must_equal_limits(k):
    ns = k.namespace()
    manifest = pod("uneven")
    manifest["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    with pytest.raises(ApiException) as caught:
        k.core.create_namespaced_pod(ns, manifest)
    assert caught.value.status == 422
    assert "must be equal to nvidia.com/gpu limit of 1" in error_body(caught.value)["message"]


def test_limits_only_pods_get_requests_and_are_charged(k):
    ns = k.namespace()
    gpu_quota(k, ns, gpus="1")
    created = k.core.create_namespaced_pod(ns, pod("limits-only", gpus=1))
    assert created.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}
    assert wait_for(lambda: used(k, ns) == {"requests.nvidia.com/gpu": "1"})


def test_mig_profiles_have_their_own_quota_keys(k):
    ns = k.namespace()
    k.core.create_namespaced_resource_quota(
        ns,
        {"metadata": {"name": "mig"}, "spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "1"}}},
    )
    k.core.create_namespaced_pod(ns, pod("one", gpus=1, resource="nvidia.com/mig-1g.10gb"))
    k.core.create_namespaced_pod(ns, pod("whole", gpus=1))  # a whole GPU is another key
    with pytest.raises(ApiException) as caught:
        k.core.create_namespaced_pod(ns, pod("two", gpus=1, resource="nvidia.com/mig-1g.10gb"))
    assert "requested: requests.nvidia.com/mig-1g.10gb=1" in error_body(caught.value)["message"]
