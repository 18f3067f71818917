"""cluster.inventory for DRA flavors: pure functions over DeviceClass, ResourceSlice
and ResourceClaim dicts, tested by comparing output."""

from cluster.devices import quota_resource
from cluster.inventory import (
    ALL_NODES,
    DRA_UNAVAILABLE,
    NODE_SELECTOR,
    Dra,
    node_selected,
    take_inventory,
)
from cluster.inventory import (
    FlavorFigures as Figures,
)
from cluster.models import Flavor
from tests.dra import objects


def FlavorFigures(devices=0, allocated=0, nodes=None, problem=""):
    """The inventory's figures with `free` as DRA has it (no XIDs): devices no claim holds."""
    free = None if devices is None or allocated is None else devices - allocated
    return Figures(devices, allocated, free, nodes or {}, problem)


def flavor(slug, device_class="gpu.nvidia.com", selector=""):
    return Flavor(
        slug=slug,
        device_class=device_class,
        device_selector=selector,
        resource_name=quota_resource(device_class),
        node_selector={},
    )


def node(name, *, ready=True):
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "16"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


CLASSES = [
    objects.device_class("gpu.nvidia.com", objects.GPU_CLASS),
    objects.device_class("mig.nvidia.com", objects.MIG_CLASS),
    objects.device_class("anything.example.com", "device.driver.startsWith('gpu')"),
]
SLICES = [
    objects.resource_slice("node-a", objects.H100_DEVICES),
    objects.resource_slice("node-b", objects.L4_DEVICES + objects.MIG_DEVICES),
]
ALLOCATED = {
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": "node-a",
                        "device": "gpu-1",
                    }
                ]
            }
        }
    }
}
FLAVORS = [
    flavor("h100", selector=objects.H100_ONLY),
    flavor("big", selector=objects.AT_LEAST_40GI),
    flavor("any-gpu"),
    flavor("mig", device_class="mig.nvidia.com"),
    flavor("nowhere", device_class="nope.example.com"),
    flavor("unread", device_class="anything.example.com"),
]


def test_it_counts_each_flavors_devices_per_node_and_the_claimed_ones():
    dra = Dra(CLASSES, SLICES, [ALLOCATED, {"status": {}}])
    inventory = take_inventory([node("node-a"), node("node-b")], [], FLAVORS, dra)
    assert inventory.flavors == {
        "h100": FlavorFigures(devices=2, allocated=1, nodes={"node-a": 2}),
        "big": FlavorFigures(devices=2, allocated=1, nodes={"node-a": 2}),
        "any-gpu": FlavorFigures(devices=4, allocated=1, nodes={"node-a": 2, "node-b": 2}),
        "mig": FlavorFigures(devices=2, allocated=0, nodes={"node-b": 2}),
        "nowhere": FlavorFigures(
            problem="DeviceClass nope.example.com does not exist on the cluster."
        ),
        "unread": FlavorFigures(
            devices=None,
            allocated=None,
            problem="DeviceClass anything.example.com has a selector the portal does not read "
            "(device.driver takes == or !=, not .; the portal reads a conjunction (&&) of: "
            'device.driver == "..."; device.attributes["domain"].name == (or !=) a string, '
            'integer or true/false; device.capacity["domain"].name.compareTo(quantity("40Gi")) '
            ">= 0 (any of < <= == != >= >)); its devices are not counted.",
        ),
    }
    # The nodes table: each class's devices on the node, under its quota key.
    assert {n.name: (n.allocatable, n.allocated) for n in inventory.nodes} == {
        "node-a": ({objects.QUOTA_KEY: 2}, {objects.QUOTA_KEY: 1}),
        "node-b": (
            {objects.QUOTA_KEY: 2, "mig.nvidia.com.deviceclass.resource.k8s.io/devices": 2},
            {},
        ),
    }


def test_a_node_not_ready_offers_no_devices_but_they_stay_the_flavors():
    dra = Dra(CLASSES, SLICES, [])
    inventory = take_inventory([node("node-a", ready=False)], [], FLAVORS[:1], dra)
    assert inventory.flavors["h100"] == FlavorFigures(devices=0, allocated=0, nodes={"node-a": 2})


def test_only_the_newest_generation_of_a_pool_counts():
    old = objects.resource_slice("node-a", objects.H100_DEVICES, generation=1)
    new = objects.resource_slice("node-a", objects.H100_DEVICES[:1], generation=2)
    inventory = take_inventory([node("node-a")], [], FLAVORS[:1], Dra(CLASSES, [old, new], []))
    assert inventory.flavors["h100"].devices == 1


def test_without_dra_a_dra_flavor_counts_nothing_and_says_why():
    inventory = take_inventory([node("node-a")], [], FLAVORS[:1], None)
    assert inventory.flavors["h100"] == FlavorFigures(devices=0, problem=DRA_UNAVAILABLE)


def test_the_quota_rows_read_a_device_class_key_and_its_refusal():
    from cluster.inventory import quota_usage, refused_resources

    message = (
        'create ResourceClaim second-abc: resourceclaims.resource.k8s.io "second-abc" is '
        f"forbidden: exceeded quota: gpu-quota, requested: {objects.QUOTA_KEY}=1, "
        f"used: {objects.QUOTA_KEY}=1, limited: {objects.QUOTA_KEY}=1"
    )
    assert refused_resources(message) == [objects.QUOTA_KEY]
    quota = {
        "metadata": {"namespace": "vision"},
        "spec": {
            "hard": {
                objects.QUOTA_KEY: "1",
                # accepted by the API server and never enforced: not a cap
                f"requests.{objects.QUOTA_KEY}": "9",
                "requests.nvidia.com/gpu": "0",
            }
        },
        "status": {"used": {objects.QUOTA_KEY: "1"}},
    }
    event = {
        "metadata": {"namespace": "vision"},
        "lastTimestamp": "2026-12-02T04:00:00Z",
        "message": message,
    }
    usage = quota_usage([quota], [event], {"vision"})["vision"]
    assert set(usage) == {objects.QUOTA_KEY, "nvidia.com/gpu"}
    assert (usage[objects.QUOTA_KEY].hard, usage[objects.QUOTA_KEY].used) == (1, 1)
    assert usage[objects.QUOTA_KEY].refused_message == message


# --- partitionable devices: a GPU and its MIG devices share one counter set ---

A100 = flavor(
    "a100", selector='device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'
)
MIG = flavor("mig", device_class="mig.nvidia.com")


def partitioned(*claims, gpus=("gpu-0",)):
    dra = Dra(CLASSES, objects.partitionable_slices("node-a", gpus), list(claims))
    return take_inventory([node("node-a")], [], [A100, MIG], dra).flavors


def test_free_partitionable_hardware_is_counted_once_as_the_whole_gpu():
    flavors = partitioned()
    assert flavors["a100"] == FlavorFigures(devices=1, allocated=0, nodes={"node-a": 1})
    # The seven MIG devices draw on the same counters: not counted a second time.
    assert flavors["mig"] == FlavorFigures(devices=0, allocated=0, nodes={})


def test_a_gpu_with_a_mig_device_allocated_counts_for_the_mig_flavor():
    flavors = partitioned(objects.allocated("gpu-0-mig-1g10gb-3", pool="node-a-a100"))
    assert flavors["mig"] == FlavorFigures(devices=7, allocated=1, nodes={"node-a": 7})
    assert flavors["a100"] == FlavorFigures(devices=0, allocated=0, nodes={})


def test_a_whole_gpu_allocated_leaves_no_mig_device():
    flavors = partitioned(objects.allocated("gpu-0", pool="node-a-a100"))
    assert flavors["a100"] == FlavorFigures(devices=1, allocated=1, nodes={"node-a": 1})
    assert flavors["mig"] == FlavorFigures(devices=0, allocated=0, nodes={})


def test_each_gpu_goes_to_one_flavor_and_the_counters_left_bound_the_mig_devices():
    # gpu-1 holds a 1g.10gb and, drawn by hand from its counters, 56 of its 98
    # multiprocessors elsewhere: only three more 1g.10gb fit (14 each).
    slices = objects.partitionable_slices("node-a", ("gpu-0", "gpu-1"))
    slices[0]["spec"]["sharedCounters"][1]["counters"]["multiprocessors"] = {"value": "56"}
    claims = [objects.allocated("gpu-1-mig-1g10gb-0", pool="node-a-a100")]
    dra = Dra(CLASSES, slices, claims)
    flavors = take_inventory([node("node-a")], [], [A100, MIG], dra).flavors
    assert (flavors["a100"].devices, flavors["mig"].devices) == (1, 4)
    assert flavors["mig"].allocated == 1


# --- devices not bound to one node ---


def unbound_slice(placement, devices):
    item = objects.resource_slice("ignored", devices, pool="fabric")
    del item["spec"]["nodeName"]
    item["spec"] |= placement
    return item


SELECTOR = {
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
        ]
    }
}


def labelled(name, **labels):
    item = node(name)
    item["metadata"]["labels"] = labels
    return item


def test_devices_for_all_nodes_are_counted_once_and_offered_while_a_node_is_open():
    dra = Dra(CLASSES, [unbound_slice({"allNodes": True}, objects.H100_DEVICES)], [])
    inventory = take_inventory([node("node-a"), node("node-b")], [], FLAVORS[:1], dra)
    assert inventory.flavors["h100"] == FlavorFigures(devices=2, nodes={ALL_NODES: 2})
    inventory = take_inventory([node("node-a", ready=False)], [], FLAVORS[:1], dra)
    assert inventory.flavors["h100"] == FlavorFigures(devices=0, nodes={ALL_NODES: 2})


def test_devices_behind_a_node_selector_are_offered_only_if_a_node_it_selects_is_open():
    dra = Dra(CLASSES, [unbound_slice(SELECTOR, objects.H100_DEVICES)], [])
    selected = take_inventory([labelled("a", rack="r1")], [], FLAVORS[:1], dra)
    assert selected.flavors["h100"] == FlavorFigures(devices=2, nodes={NODE_SELECTOR: 2})
    elsewhere = take_inventory([labelled("b", rack="r2")], [], FLAVORS[:1], dra)
    assert elsewhere.flavors["h100"] == FlavorFigures(devices=0, nodes={NODE_SELECTOR: 2})
    assert node_selected(labelled("c", rack="r1"), SELECTOR["nodeSelector"]["nodeSelectorTerms"])
    by_name = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["d"]}]}]
    assert node_selected(node("d"), by_name) and not node_selected(node("e"), by_name)


def test_an_extended_resource_a_device_class_maps_counts_its_devices():
    mapped = objects.device_class("gpu.nvidia.com", objects.GPU_CLASS)
    mapped["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    dra = Dra([mapped], SLICES, [ALLOCATED])
    extended = Flavor(slug="gpu", resource_name="nvidia.com/gpu", node_selector={"zone": "a"})
    inventory = take_inventory(
        [labelled("node-a", zone="a"), labelled("node-b", zone="b")], [], [extended], dra
    )
    assert inventory.flavors["gpu"] == FlavorFigures(devices=2, allocated=1, nodes={"node-a": 2})
    # Without the mapping the nodes offer no nvidia.com/gpu.
    plain = Dra([objects.device_class("gpu.nvidia.com", objects.GPU_CLASS)], SLICES, [])
    assert (
        take_inventory([labelled("node-a", zone="a")], [], [extended], plain).flavors["gpu"]
        == FlavorFigures()
    )
