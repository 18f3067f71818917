from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from tests.factories import FlavorFactory, next_week, submit

PERSONAS = ["admin_user", "alice", "carol", "bob", "charlie"]


def client_for(user=None):
    """A client logged in with a session, as a browser using the API would be."""
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def persona(request):
    """The user named by an indirect parametrization; None is anonymous."""
    return request.getfixturevalue(request.param) if request.param else None


@pytest.fixture
def pending(vision, alice, h100):
    return submit(vision, h100, alice, gpus=2, starts_at=next_week())


@pytest.fixture
def small(db):
    """A flavor with 4 GPUs, easy to fill."""
    return FlavorFactory(
        slug="t4", name="T4 16GB", capacity=4, price_per_gpu_hour=Decimal("0.5000")
    )
