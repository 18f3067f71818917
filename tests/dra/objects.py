"""DRA objects as NVIDIA's driver (k8s-dra-driver-gpu) publishes them, for the tests.

Attribute and capacity names are the driver's: type (gpu | mig), productName,
brand, architecture, cudaComputeCapability (a version), uuid; MIG devices add
profile and parentUUID; capacity memory in bytes. Device names take no dots.
"""

GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
H100_ONLY = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
AT_LEAST_40GI = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
QUOTA_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def device_class(name, expression):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu(name, product, memory, architecture="Hopper"):
    return {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": architecture},
            "cudaComputeCapability": {"version": "9.0.0"},
            "uuid": {"string": f"GPU-{name}"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def mig(name, profile, memory):
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            "parentUUID": {"string": "GPU-a100"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def resource_slice(node, devices, *, generation=1, pool=None, owner=None):
    """`owner`: the Node object, to own the slice as the driver's kubelet plugin does
    (k8s.io/dynamic-resource-allocation/kubeletplugin): it goes with the Node."""
    pool = pool or node
    metadata = {"name": f"{pool}-gpu.nvidia.com-{generation}"}
    if owner:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": owner["metadata"]["uid"]}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


# Two H100s on one node, two L4s and two MIG 1g.10gb devices on another.
H100_DEVICES = [gpu(f"gpu-{i}", "NVIDIA H100 80GB HBM3", "80Gi") for i in range(2)]
L4_DEVICES = [gpu(f"gpu-{i}", "NVIDIA L4", "24Gi", "Ada Lovelace") for i in range(2)]
MIG_DEVICES = [mig(f"gpu-2-mig-1g10gb-{i}", "1g.10gb", "9856Mi") for i in range(2)]


def claim(name, namespace, *, count=1, selector=None, device_class_name="gpu.nvidia.com"):
    exactly = {"deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


# Partitionable devices (resource.k8s.io/v1, DRAPartitionableDevices): an A100 and
# the seven MIG 1g.10gb devices carved from it draw on one counter set, published
# in a slice of its own ("only one of devices and sharedCounters"); counter names
# are lowercase labels, device names take no dots.
A100_SLICES = 7


def counter_set(name):
    counters = {"multiprocessors": {"value": "98"}}
    counters |= {f"memory-slice-{i}": {"value": "1"} for i in range(A100_SLICES)}
    return {"name": name, "counters": counters}


def partitionable_slices(node, gpus=("gpu-0",), *, pool=None):
    """Two slices of one pool: the counter sets, and per GPU the whole A100 (drawing
    on every counter) and its seven 1g.10gb MIG devices (one memory slice each)."""
    pool = pool or f"{node}-a100"
    devices = []
    for name in gpus:
        counter_name = f"{name}-counter-set"
        every = counter_set(counter_name)["counters"]
        whole = gpu(name, "NVIDIA A100-SXM4-80GB", "80Gi", "Ampere")
        whole["consumesCounters"] = [{"counterSet": counter_name, "counters": every}]
        devices.append(whole)
        for i in range(A100_SLICES):
            part = mig(f"{name}-mig-1g10gb-{i}", "1g.10gb", "9856Mi")
            part["consumesCounters"] = [
                {
                    "counterSet": counter_name,
                    "counters": {
                        "multiprocessors": {"value": "14"},
                        f"memory-slice-{i}": {"value": "1"},
                    },
                }
            ]
            devices.append(part)
    common = {"driver": "gpu.nvidia.com", "nodeName": node}
    pool_spec = {"name": pool, "generation": 1, "resourceSliceCount": 2}
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{pool}-counters"},
            "spec": {
                **common,
                "pool": pool_spec,
                "sharedCounters": [counter_set(f"{n}-counter-set") for n in gpus],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{pool}-devices"},
            "spec": {**common, "pool": pool_spec, "devices": devices},
        },
    ]


def allocated(*devices, pool):
    """A claim (status only) holding `devices` of `pool`."""
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": name}
        for name in devices
    ]
    return {"status": {"allocation": {"devices": {"results": results}}}}
