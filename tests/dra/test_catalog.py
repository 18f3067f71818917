"""DRA flavors in the catalog: the admin's form, the database's own check, the API."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.db import IntegrityError

from cluster.models import Flavor
from tests.api.conftest import client_for
from tests.factories import FlavorFactory

SELECTOR = (
    'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3" && '
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
)


@pytest.fixture
def admin_client(client, admin_user):
    admin_user.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_flavor", "change_flavor", "view_flavor"])
    )
    client.force_login(admin_user)
    return client


def form(**fields):
    return {
        "name": "H100 by DRA",
        "slug": "h100-dra",
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "memory_gb": "80",
        "sharing": "whole",
        "resource_name": "nvidia.com/gpu",
        "node_selector": "{}",
        "tolerations": "[]",
        "device_class": "gpu.nvidia.com",
        "device_selector": SELECTOR,
        "capacity": "8",
        "price_per_gpu_hour": "4.0000",
        "is_active": "on",
        **fields,
    }


def test_it_creates_a_dra_flavor_whose_resource_is_the_class_quota_key(admin_client):
    response = admin_client.post("/admin/cluster/flavor/add/", form())
    assert response.status_code == 302, response.content.decode()
    flavor = Flavor.objects.get(slug="h100-dra")
    assert flavor.is_dra
    assert flavor.resource_name == "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    assert flavor.held_as == f"DRA: devices of DeviceClass gpu.nvidia.com where {SELECTOR}"
    listing = admin_client.get("/admin/cluster/flavor/").content.decode()
    assert "DRA: devices of DeviceClass gpu.nvidia.com" in listing


def test_it_refuses_a_selector_outside_the_subset_and_says_what_it_reads(admin_client):
    response = admin_client.post(
        "/admin/cluster/flavor/add/",
        form(device_selector="device.attributes['gpu.nvidia.com'].type == 'gpu' || true"),
    )
    assert response.status_code == 200
    assert "the portal reads a conjunction (&amp;&amp;) of" in response.content.decode()
    assert not Flavor.objects.exists()


def test_it_refuses_a_node_selector_on_a_dra_flavor(admin_client):
    response = admin_client.post(
        "/admin/cluster/flavor/add/",
        form(node_selector='{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}'),
    )
    assert "A DRA flavor picks devices, not nodes" in response.content.decode()
    assert not Flavor.objects.exists()


def test_it_refuses_a_selector_without_a_class(admin_client):
    response = admin_client.post("/admin/cluster/flavor/add/", form(device_class=""))
    assert "A device selector needs a DeviceClass" in response.content.decode()
    assert not Flavor.objects.exists()


def test_an_extended_resource_flavor_is_unchanged(admin_client):
    response = admin_client.post(
        "/admin/cluster/flavor/add/",
        form(
            device_class="",
            device_selector="",
            node_selector='{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}',
        ),
    )
    assert response.status_code == 302
    flavor = Flavor.objects.get(slug="h100-dra")
    assert not flavor.is_dra
    assert flavor.resource_name == "nvidia.com/gpu"
    assert flavor.held_as == (
        "Extended resource nvidia.com/gpu on nodes labelled "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    )


def test_the_database_refuses_a_dra_flavor_with_another_quota_key(db):
    with pytest.raises(IntegrityError):
        FlavorFactory(slug="bad", device_class="gpu.nvidia.com", resource_name="nvidia.com/gpu")


def test_the_api_says_how_a_flavor_is_held(alice, h100):
    FlavorFactory(
        slug="h100-dra",
        device_class="gpu.nvidia.com",
        device_selector=SELECTOR,
        resource_name="gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
        node_selector={},
        price_per_gpu_hour=Decimal("4.0000"),
    )
    results = {f["slug"]: f for f in client_for(alice).get("/api/v1/flavors/").json()["results"]}
    assert results["h100"]["held_by"] == "extended_resource"
    assert results["h100"]["device_class"] == ""
    assert results["h100-dra"]["held_by"] == "dra"
    assert results["h100-dra"]["device_class"] == "gpu.nvidia.com"
    assert results["h100-dra"]["device_selector"] == SELECTOR
