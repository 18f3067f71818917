import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import PERSONAS, client_for
from tests.factories import FlavorFactory


@pytest.mark.parametrize("persona", PERSONAS, indirect=True)
def test_it_shows_the_catalog_to_everyone_signed_in(persona, h100, a100):
    response = client_for(persona).get("/api/v1/flavors/")
    assert response.status_code == 200
    assert [flavor["slug"] for flavor in response.json()["results"]] == ["a100", "h100"]


def test_it_describes_a_flavor(alice, a100):
    flavor = client_for(alice).get("/api/v1/flavors/").json()["results"][0]
    assert flavor == {
        "slug": "a100",
        "name": "A100 80GB",
        "cluster": "default",
        "gpu_model": "NVIDIA A100 80GB PCIe",
        "memory_gb": 80,
        "sharing": "whole",
        "held_by": "extended_resource",
        "resource_name": "nvidia.com/gpu",
        "capacity": 16,
        "price_per_gpu_hour": "2.5000",
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA A100 80GB PCIe"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "device_class": "",
        "device_selector": "",
    }


def test_it_leaves_out_retired_flavors(alice, h100):
    FlavorFactory(slug="k80", name="K80", is_active=False)
    client = client_for(alice)
    assert [f["slug"] for f in client.get("/api/v1/flavors/").json()["results"]] == ["h100"]
    assert client.get("/api/v1/flavors/k80/").status_code == 404
    assert client.get("/api/v1/flavors/h100/").json()["name"] == "H100 80GB"


def test_it_asks_anonymous_callers_to_authenticate(h100):
    assert client_for(None).get("/api/v1/flavors/").status_code == 401
    assert client_for(None).get("/api/v1/flavors/h100/").status_code == 401


def test_it_lists_in_a_fixed_number_of_queries(alice, h100):
    client = client_for(alice)
    with CaptureQueriesContext(connection) as one:
        client.get("/api/v1/flavors/")
    for n in range(5):
        FlavorFactory(slug=f"mig-{n}")
    with CaptureQueriesContext(connection) as six:
        assert len(client.get("/api/v1/flavors/").json()["results"]) == 6
    assert len(six) == len(one)
