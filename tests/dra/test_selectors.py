"""The CEL subset the portal reads (cluster/devices.py): what it reads, what it refuses."""

from decimal import Decimal

import pytest

from cluster import devices

H100 = {
    "name": "gpu-0",
    "attributes": {
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "index": {"int": 0},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}
MIG_1G = {
    "name": "gpu-0-mig-1g10gb-0",
    "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}},
    "capacity": {"memory": {"value": "9856Mi"}},
}
NVIDIA_GPU_CLASS = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def matches(expression, device, driver="gpu.nvidia.com"):
    return devices.device_matches(devices.parse_selector(expression), device, driver)


def test_it_reads_nvidias_own_device_class():
    assert matches(NVIDIA_GPU_CLASS, H100)
    assert not matches(NVIDIA_GPU_CLASS, MIG_1G)
    assert not matches(NVIDIA_GPU_CLASS, H100, driver="gpu.example.com")


@pytest.mark.parametrize(
    ("expression", "h100", "mig"),
    [
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', 1, 0),
        ('device.attributes["gpu.nvidia.com"].productName != "NVIDIA H100 80GB HBM3"', 0, 0),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True, False),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) < 0', False, True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) == 0', True, False),
        ('device.attributes["gpu.nvidia.com"].index == 0', True, False),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True, False),
        (
            "(device.attributes['gpu.nvidia.com'].type == 'mig') && "
            "device.driver == 'gpu.nvidia.com'",
            False,
            True,
        ),
        ("", True, True),
    ],
)
def test_it_evaluates_the_subset(expression, h100, mig):
    assert (matches(expression, H100), matches(expression, MIG_1G)) == (bool(h100), bool(mig))


def test_a_missing_attribute_or_a_type_mismatch_does_not_match():
    assert not matches('device.attributes["gpu.nvidia.com"].brand == "Nvidia"', H100)
    assert not matches('device.attributes["gpu.nvidia.com"].index == "0"', H100)


@pytest.mark.parametrize(
    "expression",
    [
        "device.attributes['gpu.nvidia.com'].type == 'gpu' || true",
        "!(device.driver == 'gpu.nvidia.com')",
        "'type' in device.attributes['gpu.nvidia.com']",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
        "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('forty')) >= 0",
        "device.attributes['gpu.nvidia.com'].productName.matches('H100')",
        "device.attributes['gpu.nvidia.com'].productName == ",
        "device.driver == 'gpu.nvidia.com' &&",
    ],
)
def test_it_refuses_what_it_does_not_read_and_says_what_it_does(expression):
    with pytest.raises(devices.SelectorError) as refused:
        devices.parse_selector(expression)
    assert "the portal reads" in str(refused.value) or "not a Kubernetes quantity" in str(
        refused.value
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("80Gi", 80 * 2**30), ("40G", 40 * 10**9), ("500m", Decimal("0.5")), ("1e3", 1000), ("7", 7)],
)
def test_quantities(text, value):
    assert devices.parse_quantity(text) == value


def test_the_quota_key_of_a_class():
    assert devices.quota_resource("gpu.nvidia.com") == (
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    )
