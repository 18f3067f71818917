"""Billing fixtures: the catalog of tests/billing/history.py and quota granted
through the actions at the time it starts."""

from decimal import Decimal

import pytest
import time_machine

from cluster.models import Flavor
from gpu_requests import actions
from tests.factories import FlavorFactory, submit


@pytest.fixture
def catalog(db):
    """h100 and a100 share nvidia.com/gpu (told apart by node label), a MIG
    slice of the A100 and a time-sliced T4."""
    h100 = FlavorFactory(
        slug="h100",
        name="H100 80GB",
        gpu_model="NVIDIA-H100-80GB-HBM3",
        memory_gb=80,
        price_per_gpu_hour=Decimal("4.0000"),
    )
    a100 = FlavorFactory(
        slug="a100",
        name="A100 80GB",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        memory_gb=80,
        price_per_gpu_hour=Decimal("2.8000"),
    )
    mig = FlavorFactory(
        slug="a100-3g",
        name="A100 MIG 3g.40gb",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        memory_gb=40,
        sharing=Flavor.Sharing.MIG,
        resource_name="nvidia.com/mig-3g.40gb",
        price_per_gpu_hour=Decimal("9.9900"),  # replaced by the derived rate
        capacity=2,
    )
    t4 = FlavorFactory(
        slug="t4-shared",
        name="T4 shared",
        gpu_model="Tesla-T4-SHARED",
        memory_gb=16,
        sharing=Flavor.Sharing.TIME_SLICED,
        resource_name="nvidia.com/gpu.shared",
        price_per_gpu_hour=Decimal("0.1000"),
        capacity=4,
    )
    l4 = FlavorFactory(
        slug="l4",
        name="L4 24GB (spot)",
        gpu_model="NVIDIA-L4",
        memory_gb=24,
        price_per_gpu_hour=Decimal("1.0000"),
        capacity=2,
    )
    return {"h100": h100, "a100": a100, "mig": mig, "t4": t4, "l4": l4}


@pytest.fixture
def grant(admin_user):
    """grant(team, flavor, gpus, start, end, by): submitted, approved and
    activated by the beat, each at its time."""

    def grant(team, flavor, gpus, start, end, by):
        with time_machine.travel(start.replace(day=1, hour=0)):
            quota_request = submit(team, flavor, by, gpus=gpus, starts_at=start, ends_at=end)
            actions.approve(quota_request, by=admin_user)
        with time_machine.travel(start):
            actions.advance_lifecycle()
        return quota_request

    return grant
