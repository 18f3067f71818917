"""An outside probe: schemathesis, every check, against the live server with
a reviewer's token and with a member's (who is refused the admins' operations,
before what they send is judged); it must report no failure. Bounded in
examples per operation and in time, with a fixed seed, so CI stays
reproducible."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.throttling import SimpleRateThrottle

from tests.factories import add_member, next_week, submit

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.fixture
def unthrottled(monkeypatch):
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": None, "anon": None})
    cache.clear()


@pytest.mark.parametrize("who", ["admin_user", "alice"])
def test_schemathesis_finds_nothing(
    transactional_db,
    live_server,
    unthrottled,
    admin_user,
    alice,
    bob,
    vision,
    nlp,
    h100,
    a100,
    request,
    who,
):
    add_member(vision, admin_user, role="manager")
    submit(vision, h100, alice, gpus=2, starts_at=next_week())
    submit(nlp, a100, bob, gpus=4, starts_at=next_week(days=3))
    token = Token.objects.create(user=request.getfixturevalue(who))
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "run",
            f"{live_server.url}/api/schema/?format=json",
            "--url",
            live_server.url,
            "--checks",
            "all",
            "--max-examples",
            "30",
            "--seed",
            "11",
            "--generation-database",
            "none",
            "--workers",
            "1",
            "--no-color",
            "--header",
            f"Authorization: Token {token.key}",
        ],
        capture_output=True,
        text=True,
        timeout=900,  # a busy machine: ~6 min with a CPU burner beside the suite
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-3000:]
