"""Inventory: devices per flavor counted from kubesim's Nodes and Pods."""

from cluster import actions
from cluster.models import FlavorCapacity, GpuNode
from tests.provisioning.conftest import DEMO_FLAVORS, wait_for


def devices():
    return dict(FlavorCapacity.objects.values_list("flavor__slug", "devices"))


def test_it_matches_the_demo_cluster_file(cluster, demo_flavors):
    assert actions.record_inventory() == 17  # GPU nodes in kubesim/clusters/demo.yaml
    assert devices() == {slug: count for slug, (_, _, count) in DEMO_FLAVORS.items()}
    assert set(FlavorCapacity.objects.values_list("allocated", flat=True)) == {0}


def test_the_inventory_becomes_the_capacity_approvals_use(cluster, demo_flavors):
    demo_flavors["h100"].__class__.objects.filter(pk=demo_flavors["h100"].pk).update(capacity=99)
    actions.record_inventory()
    demo_flavors["h100"].refresh_from_db()
    assert demo_flavors["h100"].capacity == 16


def test_a_manual_override_wins(cluster, demo_flavors, admin_user):
    h100 = demo_flavors["h100"]
    actions.record_inventory()
    actions.set_capacity_override(h100, 12, by=admin_user)
    actions.record_inventory()
    h100.refresh_from_db()
    assert h100.capacity == 12
    assert FlavorCapacity.objects.get(flavor=h100).devices == 16


def test_cordoned_nodes_do_not_count(cluster, demo_flavors):
    cluster.call(
        "PATCH",
        cluster.path("Node", "gpu-h100-0"),
        body={"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
    )
    # The node lifecycle controller taints a cordoned node, as Kubernetes does
    # (TaintNodesByCondition); read the inventory once it has.
    wait_for(lambda: len(cluster.get("Node", "gpu-h100-0")["spec"].get("taints") or []) == 2)
    actions.record_inventory()
    assert devices()["h100"] == 8
    node = GpuNode.objects.get(name="gpu-h100-0")
    assert node.cordoned
    assert node.pool == "h100"
    # As the real node lifecycle controller does, kubesim taints a cordoned node.
    assert node.taint_labels == [
        "nvidia.com/gpu:NoSchedule",
        "node.kubernetes.io/unschedulable:NoSchedule",
    ]


def run_train_pod(cluster):
    """Pod vision/train bound to gpu-h100-1, holding 3 of its GPUs."""
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "vision"},
        },
        field_manager="test",
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "vision"},
        "spec": {
            "nodeName": "gpu-h100-1",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "pytorch:2",
                    "resources": {"limits": {"nvidia.com/gpu": "3"}},
                }
            ],
        },
    }
    cluster.call("POST", cluster.path("Pod", namespace="vision"), body=pod)


def test_pods_on_a_flavors_nodes_count_as_allocated(cluster, demo_flavors):
    run_train_pod(cluster)
    actions.record_inventory()
    h100 = FlavorCapacity.objects.get(flavor=demo_flavors["h100"])
    assert (h100.devices, h100.allocated, h100.free) == (16, 3, 13)
    assert GpuNode.objects.get(name="gpu-h100-1").resources() == [("nvidia.com/gpu", 8, 3, 5)]
