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


def resource_slice(node, devices, *, generation=1, pool=None):
    pool = pool or node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{pool}-gpu.nvidia.com-{generation}"},
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
