"""The API answers 429 with Retry-After past the rate (per user, per address
for anonymous callers) and the schema documents it."""

import pytest
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from tests.api.conftest import client_for


@pytest.fixture
def low_rates(monkeypatch):
    # The rates are read once at import (DRF); PORTAL_API_RATE_* set them in production.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/min", "anon": "2/min"})
    cache.clear()
    yield
    cache.clear()


def test_a_user_past_the_rate_gets_429(alice, bob, low_rates):
    client = client_for(alice)
    assert [client.get("/api/v1/teams/").status_code for _ in range(3)] == [200] * 3
    response = client.get("/api/v1/teams/")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "throttled" in response.json()["detail"]
    # Counted per user: bob is not held back by alice.
    assert client_for(bob).get("/api/v1/teams/").status_code == 200


def test_anonymous_callers_are_counted_per_address(db, low_rates):
    # (Anonymous calls elsewhere are refused with 401 before any counting.)
    here, there = client_for(None), client_for(None)
    there.defaults["REMOTE_ADDR"] = "10.2.3.4"
    assert [here.get("/api/schema/").status_code for _ in range(2)] == [200, 200]
    assert here.get("/api/schema/").status_code == 429
    assert there.get("/api/schema/").status_code == 200


def test_behind_the_ingress_anonymous_callers_are_counted_per_client(db, low_rates, settings):
    settings.PORTAL_TRUSTED_PROXIES = 1
    here, there = client_for(None), client_for(None)
    for client, address in ((here, "203.0.113.9"), (there, "198.51.100.20")):
        client.defaults.update(REMOTE_ADDR="10.42.0.7", HTTP_X_FORWARDED_FOR=address)
    assert [here.get("/api/schema/").status_code for _ in range(3)] == [200, 200, 429]
    assert there.get("/api/schema/").status_code == 200
