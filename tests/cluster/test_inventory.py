"""cluster.inventory: pure functions over Node and Pod dicts, tested by comparing output."""

from types import SimpleNamespace

from cluster import inventory
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
        # the cordoned node offers none, but its devices are still the flavor's; its
        # pods' 2 GPUs are allocated, and free nothing of what can run
        "h100": FlavorFigures(
            devices=8, allocated=6, free=4, nodes={"gpu-h100-0": 8, "gpu-h100-1": 8}
        ),
        "a100": FlavorFigures(devices=0, allocated=1, nodes={"gpu-a100-0": 8}),  # not Ready
        "a100-1g": FlavorFigures(devices=0, allocated=0),
    }
    assert inventory.nodes == [
        GpuNodeFigures(
            name="gpu-h100-0",
            pool="h100",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 4},
            labels={**H100, "kubesim.io/pool": "h100"},
            usable={"nvidia.com/gpu": 8},
        ),
        GpuNodeFigures(
            name="gpu-h100-1",
            pool="h100-spot",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 2},
            taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            cordoned=True,
            labels={**H100, "karpenter.sh/nodepool": "h100-spot"},
        ),
        GpuNodeFigures(
            name="gpu-a100-0",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            allocatable={"nvidia.com/gpu": 8},
            allocated={"nvidia.com/gpu": 1},
            ready=False,
            labels=A100,
        ),
    ]


XID_79 = {"gpu": "2", "code": 79, "meaning": "GPU has fallen off the bus"}


def test_a_gpu_an_xid_took_out_of_service_is_not_capacity():
    """Counted once whether or not the device plugin has already taken it out of
    the allocatable (the node's capacity still lists it)."""
    seen_by_dcgm_only = node("gpu-h100-0", H100, {"nvidia.com/gpu": "8"})
    seen_by_both = node("gpu-h100-1", H100, {"nvidia.com/gpu": "7"})
    seen_by_both["status"]["capacity"] = {"nvidia.com/gpu": "8"}
    pods = [pod("gpu-h100-0", limits={"nvidia.com/gpu": "3"})]
    xids = {"gpu-h100-0": [XID_79], "gpu-h100-1": [XID_79]}
    inventory = take_inventory([seen_by_dcgm_only, seen_by_both], pods, [h100], xids=xids)
    assert inventory.flavors["h100"] == FlavorFigures(
        devices=14, allocated=3, free=11, nodes={"gpu-h100-0": 7, "gpu-h100-1": 7}
    )
    assert [(n.usable, n.xids) for n in inventory.nodes] == [
        ({"nvidia.com/gpu": 7}, [XID_79]),
        ({"nvidia.com/gpu": 7}, [XID_79]),
    ]


def test_an_xid_takes_a_mig_gpus_share_of_its_slices():
    """Two GPUs each cut into two 3g.40gb slices: one GPU out of service takes two."""
    mig = node("gpu-a100-0", {**A100, "nvidia.com/gpu.count": "2"}, {"nvidia.com/mig-3g.40gb": "4"})
    mig_3g = flavor("a100-3g", "nvidia.com/mig-3g.40gb", **A100)
    inventory = take_inventory([mig], [], [mig_3g], xids={"gpu-a100-0": [XID_79]})
    assert inventory.flavors["a100-3g"].devices == 2


def test_quantities_that_are_not_whole_devices_count_as_none():
    odd = node("gpu-odd", H100, {"nvidia.com/gpu": "500m"})
    assert take_inventory([odd], [], [h100]).nodes == []


# --- namespace quota ---

REFUSAL = (
    'Error creating: pods "train-x" is forbidden: exceeded quota: gpu-quota, '
    "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, "
    "limited: requests.nvidia.com/gpu=2"
)


def quota(namespace, name, hard, used):
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used},
    }


def event(namespace, message, stamp):
    return {
        "metadata": {"namespace": namespace},
        "reason": "FailedCreate",
        "message": message,
        "lastTimestamp": stamp,
    }


def test_refused_resources_are_read_from_the_quota_message():
    assert inventory.refused_resources(REFUSAL) == ["nvidia.com/gpu"]
    two = "exceeded quota: q, requested: requests.cpu=1,requests.nvidia.com/mig-1g.10gb=2, used: x"
    assert inventory.refused_resources(two) == ["cpu", "nvidia.com/mig-1g.10gb"]
    assert inventory.refused_resources("Error creating: pods is forbidden: no such thing") == []


def test_quota_usage_keeps_gpu_keys_of_team_namespaces_and_the_last_refusal():
    quotas = [
        quota(
            "vision",
            "gpu-quota",
            {"requests.nvidia.com/gpu": "2", "requests.cpu": "8"},
            {"requests.nvidia.com/gpu": "2", "requests.cpu": "1"},
        ),
        quota("vision", "tighter", {"requests.nvidia.com/mig-1g.10gb": "1"}, {}),
        quota("vision", "looser", {"requests.nvidia.com/mig-1g.10gb": "9"}, {}),
        quota("kube-system", "gpu-quota", {"requests.nvidia.com/gpu": "1"}, {}),
    ]
    events = [
        event("vision", REFUSAL, "2026-12-01T10:00:00Z"),
        event("vision", REFUSAL.replace("train-x", "train-y"), "2026-12-01T10:05:00Z"),
        event("vision", "Error creating: something else", "2026-12-01T10:09:00Z"),
        event("kube-system", REFUSAL, "2026-12-01T10:09:00Z"),
    ]
    usage = inventory.quota_usage(quotas, events, {"vision"})
    assert set(usage) == {"vision"}
    gpu = usage["vision"]["nvidia.com/gpu"]
    assert (gpu.hard, gpu.used, gpu.at_limit) == (2, 2, True)
    assert gpu.refused_at == "2026-12-01T10:05:00Z" and "train-y" in gpu.refused_message
    mig = usage["vision"]["nvidia.com/mig-1g.10gb"]
    assert (mig.hard, mig.used, mig.at_limit, mig.refused_at) == (1, 0, False, "")
    assert "cpu" not in usage["vision"]
