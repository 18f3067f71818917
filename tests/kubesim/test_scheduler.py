"""Scheduling over HTTP on the small cluster: gpu-h100-0 (2 GPUs), gpu-l4-0 (2 GPUs,
spot), gpu-mig-0 (A100 MIG all-balanced), cpu-0, cpu-1; GPU nodes are tainted."""

import pytest

from kubesim.controllers import scheduler
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import Clients, pod, wait_for


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def node_of(k, ns, name):
    return wait_for(lambda: k.core.read_namespaced_pod(name, ns).spec.node_name)


def failed_scheduling(k, ns, name):
    def find():
        events = k.core.list_namespaced_event(ns).items
        return next(
            (
                e
                for e in events
                if e.involved_object.name == name and e.reason == "FailedScheduling"
            ),
            None,
        )

    return wait_for(find)


def scheduled_condition(k, ns, name):
    conditions = k.core.read_namespaced_pod(name, ns).status.conditions or []
    return next((c for c in conditions if c.type == "PodScheduled"), None)


def test_it_binds_by_gpu_product_selector(k):
    ns = k.namespace()
    selector = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    k.core.create_namespaced_pod(ns, pod("infer", 1, node_selector=selector))
    assert node_of(k, ns, "infer") == "gpu-l4-0"
    assert scheduled_condition(k, ns, "infer").status == "True"
    annotations = k.core.read_namespaced_pod("infer", ns).metadata.annotations
    assert annotations[scheduler.DEVICES_ANNOTATION] == "gpu-l4-0/0"


def test_it_places_mig_pods_on_mig_nodes(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("mig", 1, resource="nvidia.com/mig-3g.40gb"))
    assert node_of(k, ns, "mig") == "gpu-mig-0"


def test_an_untolerated_taint_keeps_gpu_pods_off_gpu_nodes(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("no-toleration", 1, tolerate=False))
    event = failed_scheduling(k, ns, "no-toleration")
    assert event.type == "Warning"
    assert event.message == (
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "3 node(s) had untolerated taint {nvidia.com/gpu: }. "
        "preemption: 0/5 nodes are available: 2 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    condition = scheduled_condition(k, ns, "no-toleration")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert k.core.read_namespaced_pod("no-toleration", ns).status.phase == "Pending"


def test_insufficient_gpus_and_selector_mismatch_are_counted(k):
    ns = k.namespace()
    selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    k.core.create_namespaced_pod(ns, pod("greedy", 3, node_selector=selector))
    assert failed_scheduling(k, ns, "greedy").message == (
        "0/5 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "4 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/5 nodes are available: 1 No preemption victims found for incoming pod, "
        "4 Preemption is not helpful for scheduling."
    )


def test_pending_pods_schedule_once_gpus_free_up(k):
    ns = k.namespace()
    selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    k.core.create_namespaced_pod(ns, pod("holder", 2, node_selector=selector))
    assert node_of(k, ns, "holder") == "gpu-h100-0"
    k.core.create_namespaced_pod(ns, pod("waiter", 1, node_selector=selector))
    failed_scheduling(k, ns, "waiter")
    k.core.delete_namespaced_pod("holder", ns)
    # A terminating pod keeps its GPUs until its grace period (30 s) is over.
    terminating = k.core.read_namespaced_pod("holder", ns)
    assert terminating.metadata.deletion_grace_period_seconds == 30
    assert k.core.read_namespaced_pod("waiter", ns).spec.node_name is None
    k.advance(31)
    assert node_of(k, ns, "waiter") == "gpu-h100-0"


def test_node_affinity_operators(k):
    ns = k.namespace()
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["1"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "DoesNotExist"},
                            {
                                "key": "nvidia.com/gpu.family",
                                "operator": "NotIn",
                                "values": ["ampere"],
                            },
                        ]
                    }
                ]
            }
        }
    }
    k.core.create_namespaced_pod(ns, pod("picky", 1, affinity=affinity))
    assert node_of(k, ns, "picky") == "gpu-h100-0"


def test_cpu_pods_avoid_tainted_gpu_nodes_and_cordoned_nodes(k):
    ns = k.namespace()
    k.core.patch_node("cpu-0", {"spec": {"unschedulable": True}})
    try:
        k.core.create_namespaced_pod(ns, pod("web", cpu="1", tolerate=False))
        assert node_of(k, ns, "web") == "cpu-1"
    finally:
        k.core.patch_node("cpu-0", {"spec": {"unschedulable": False}})


def test_insufficient_cpu_is_reported(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("huge", cpu="64", tolerate=False))
    message = failed_scheduling(k, ns, "huge").message
    assert message.startswith("0/5 nodes are available: 2 Insufficient cpu, ")


def test_tolerations_match_like_the_scheduler():
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert scheduler.tolerates({"operator": "Exists"}, taint)
    assert scheduler.tolerates({"key": "nvidia.com/gpu", "operator": "Exists"}, taint)
    assert scheduler.tolerates({"key": "nvidia.com/gpu", "value": "present"}, taint)
    assert not scheduler.tolerates({"key": "nvidia.com/gpu", "value": "other"}, taint)
    assert not scheduler.tolerates(
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, taint
    )
