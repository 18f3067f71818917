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


@pytest.fixture
def shared_cache(settings):
    """The production set-up: every server thread counts in one Redis (a key prefix of
    this test's own), where a read then a write let parallel requests through."""
    import uuid

    import redis

    from tests.provisioning.conftest import _redis_url

    url = _redis_url()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {url}: {exc}")
    prefix = f"portal-test-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
        }
    }
    yield
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)


def test_parallel_requests_do_not_pass_the_limit(live_server, shared_cache, monkeypatch):
    """16 threads at once against 40 calls an hour: exactly 40 are answered."""
    import threading
    import urllib.error
    import urllib.request

    from rest_framework.authtoken.models import Token

    from tests.factories import UserFactory

    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {"user": "40/hour", "anon": "40/hour"}
    )
    token = Token.objects.create(user=UserFactory(username="busy"))
    statuses, lock, start = [], threading.Lock(), threading.Barrier(16)

    def hammer():
        start.wait()
        for _ in range(12):
            request = urllib.request.Request(
                f"{live_server.url}/api/v1/teams/",
                headers={"Authorization": f"Token {token.key}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            with lock:
                statuses.append(status)

    threads = [threading.Thread(target=hammer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(statuses) == 16 * 12
    assert set(statuses) <= {200, 429}
    assert statuses.count(200) == 40
