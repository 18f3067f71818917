import pytest

from tests.factories import submit


@pytest.fixture
def pending(vision, alice, h100):
    """Alice's request: 2 x H100 for 24 hours starting next week."""
    return submit(vision, h100, alice, gpus=2)


@pytest.fixture
def login(client):
    def log_in(user):
        client.force_login(user)
        return client

    return log_in
