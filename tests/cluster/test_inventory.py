"""cluster.inventory: pure functions over Node and Pod dicts, tested by comparing output."""

from types import SimpleNamespace

from cluster.inventory import (
    FlavorFigures,
    GpuNodeFigures,
    node_flavors,
    node_serves_flavor,
    take_inventory,
)


def node(name, labels=None, allocatable=None, *, ready=True, unschedulable=False, taints=None):
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", **(allocatable or {})},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(node_name, requests=None, limits=None, phase="Running"):
    return {
        "metadata": {"name": f"pod-on-{node_name}", "namespace": "vision"},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}
            ],
        },
        "status": {"phase": phase},
    }


def flavor(slug, resource_name="nvidia.com/gpu", **node_selector):
    return SimpleNamespace(slug=slug, resource_name=resource_name, node_selector=node_selector)


H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
h100 = flavor("h100", **H100)
a100 = flavor("a100", **A100)
mig_1g = flavor("a100-1g", "nvidia.com/mig-1g.10gb", **A100)


def test_a_node_serves_a_flavor_with_its_resource_name_and_every_selector_label():
    h100_node = node("gpu-h100-0", H100, {"nvidia.com/gpu": "8"})
    assert node_serves_flavor(h100_node, h100)
    assert not node_serves_flavor(h100_node, a100)  # same resource name, other selector
    assert not node_serves_flavor(h100_node, mig_1g)  # no such resource on the node
    assert node_serves_flavor(h100_node, flavor("any-gpu"))  # no selector: any node with it


def test_a_selector_must_match_every_label():
    picky = flavor("h100-us", **H100, **{"topology.kubernetes.io/zone": "us-east-1a"})
    assert not node_serves_flavor(node("n", H100, {"nvidia.com/gpu": "8"}), picky)
    zoned = node(
        "n", {**H100, "topology.kubernetes.io/zone": "us-east-1a"}, {"nvidia.com/gpu": "8"}
    )
    assert node_serves_flavor(zoned, picky)


def test_a_mig_node_serves_each_of_its_slices():
    mig = node("gpu-mig-0", A100, {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "0"})
    mig_3g = flavor("a100-3g", "nvidia.com/mig-3g.40gb", **A100)
    assert node_flavors(mig, [h100, a100, mig_1g, mig_3g]) == [mig_1g, mig_3g]


def test_the_inventory_counts_schedulable_devices_and_every_allocation():
    nodes = [
        node("cpu-0", {}, {}),
        node("gpu-h100-0", {**H100, "kubesim.io/pool": "h100"}, {"nvidia.com/gpu": "8"}),
        node(
            "gpu-h100-1",
            {**H100, "karpenter.sh/nodepool": "h100-spot"},
            {"nvidia.com/gpu": "8"},
            unschedulable=True,
            taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        ),
        node("gpu-a100-0", A100, {"nvidia.com/gpu": "8"}, ready=False),
    ]
    pods = [
        pod("gpu-h100-0", limits={"nvidia.com/gpu": "3"}),
        pod("gpu-h100-0", requests={"nvidia.com/gpu": "1", "cpu": "2"}),
        pod("gpu-h100-1", limits={"nvidia.com/gpu": "2"}),
        pod("gpu-h100-0", limits={"nvidia.com/gpu": "4"}, phase="Succeeded"),  # done: frees
        pod("gpu-a100-0", limits={"nvidia.com/gpu": "1"}),
        {"metadata": {"name": "pending"}, "spec": {"containers": []}, "status": {}},
    ]
    inventory = take_inventory(nodes, pods, [h100, a100, mig_1g])
    assert inventory.flavors == {
        "h100": FlavorFigures(devices=8, allocated=6),  # the cordoned node offers none
        "a100": FlavorFigures(devices=0, allocated=1),  # not Ready
        "a100-1g": FlavorFigures(devices=0, allocated=0),
    }
    assert inventory.nodes == [
        GpuNodeFigures(
            name="gpu-h100-0",
            pool="h100",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 4},
        ),
        GpuNodeFigures(
            name="gpu-h100-1",
            pool="h100-spot",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 2},
            taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            cordoned=True,
        ),
        GpuNodeFigures(
            name="gpu-a100-0",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 1},
            ready=False,
        ),
    ]


def test_quantities_that_are_not_whole_devices_count_as_none():
    odd = node("gpu-odd", H100, {"nvidia.com/gpu": "500m"})
    assert take_inventory([odd], [], [h100]).nodes == []
