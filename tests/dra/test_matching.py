"""What a flavor offers, read from its DRA selector where it says, else its catalog
entry (gpu_requests.matching): pure functions over unsaved flavors."""

import pytest

from cluster.models import Flavor
from gpu_requests.matching import architecture_of, matching, offer_of
from tests.dra.objects import AT_LEAST_40GI, H100_ONLY, QUOTA_KEY


def flavor(selector="", **fields):
    dra = {"device_class": "gpu.nvidia.com", "resource_name": QUOTA_KEY} if selector else {}
    defaults = {"name": "x", "gpu_model": "", "memory_gb": 0, "sharing": "whole"}
    return Flavor(device_selector=selector, **dra, **(defaults | fields))


@pytest.mark.parametrize(
    "model, architecture",
    [
        ("NVIDIA H100 80GB HBM3", "hopper"),
        ("NVIDIA-A100-SXM4-40GB", "ampere"),
        ("NVIDIA A10", "ampere"),
        ("NVIDIA L40S", "ada lovelace"),
        ("Tesla T4", "turing"),
        ("NVIDIA GB200", "blackwell"),
        ("Some accelerator", ""),
    ],
)
def test_a_models_architecture_is_read_from_its_words(model, architecture):
    assert architecture_of(model) == architecture


def test_a_dra_selector_wins_over_the_catalog():
    offer = offer_of(flavor(f"{AT_LEAST_40GI} && {H100_ONLY}", gpu_model="Any", memory_gb=1))
    assert offer.memory_gb == 40
    assert "NVIDIA H100 80GB HBM3" in offer.models and "hopper" in offer.models
    assert "Any" not in offer.models


def test_an_upper_bound_on_memory_promises_nothing():
    upper = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("24Gi")) <= 0'
    assert offer_of(flavor(upper, memory_gb=16)).memory_gb == 16


def test_a_profile_or_type_makes_a_mig_slice():
    profile = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
    assert offer_of(flavor(profile)).sharing == "mig"
    gpu = "device.attributes['gpu.nvidia.com'].type == 'gpu'"
    assert offer_of(flavor(gpu, sharing="mig")).sharing == "whole"


def test_extended_resource_flavors_match_by_their_catalog_entry():
    h100 = flavor(name="H100 80GB", gpu_model="NVIDIA H100 80GB HBM3", memory_gb=80)
    t4 = flavor(name="T4", gpu_model="Tesla T4", memory_gb=16)
    mig = flavor(name="MIG 1g.10gb", gpu_model="NVIDIA A100", memory_gb=10, sharing="mig")
    catalog = [h100, t4, mig]
    assert matching(catalog, min_memory_gb=40) == [h100]
    assert matching(catalog, model="nvidia-h100") == [h100]  # separators do not matter
    assert matching(catalog, model="ampere") == [mig]
    assert matching(catalog, sharing="mig") == [mig]
    assert matching(catalog) == catalog
