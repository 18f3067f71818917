"""PostgreSQL goes away under gunicorn and comes back: while it is gone the
portal answers 503 with Retry-After (JSON under /api/), /healthz stays up and
/readyz says the database is down; once it is back the portal serves again by
itself, with nothing restarted. The outage is a TCP proxy between gunicorn and
PostgreSQL that drops every connection and refuses new ones, as a restart does."""

import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import pytest
from rest_framework.authtoken.models import Token

from tests.ops.tcp_proxy import Proxy
from tests.ops.test_gunicorn import running_gunicorn
from tests.provisioning.conftest import _database_url

pytestmark = pytest.mark.postgres


def call(url, token=None):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Token {token}")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_postgresql_gone_is_503_and_back_is_served(transactional_db, tmp_path, alice):
    token = Token.objects.create(user=alice).key
    real = urlsplit(_database_url())
    proxy = Proxy((real.hostname, real.port or 5432))
    proxy.start()
    proxied = urlunsplit(real._replace(netloc=f"{real.username}@127.0.0.1:{proxy.port}"))
    with running_gunicorn(tmp_path, proxied, PORTAL_READY_TIMEOUT="3") as (url, _):
        assert call(f"{url}/api/v1/teams/", token)[0] == 200

        proxy.stop()  # PostgreSQL "restarts"
        status, headers, body = call(f"{url}/api/v1/teams/", token)
        assert status == 503
        assert headers["Retry-After"] == "5"
        assert json.loads(body) == {
            "detail": "The database is unavailable; try again in a few seconds."
        }
        assert call(f"{url}/healthz")[0] == 200
        status, _, body = call(f"{url}/readyz")
        assert status == 503
        assert json.loads(body)["checks"]["database"] != "ok"

        proxy.start()  # back, on the same port
        deadline = time.monotonic() + 20
        statuses = []
        while time.monotonic() < deadline:
            statuses.append(call(f"{url}/api/v1/teams/", token)[0])
            if statuses[-1] == 200:
                break
            time.sleep(0.2)
        assert statuses[-1] == 200, statuses
        assert set(statuses) <= {200, 503}
    proxy.stop()
