import subprocess
import sys
from datetime import time, timedelta

import pytest
from django.utils import timezone

from batch import actions
from batch.models import ImageRule
from cluster import clock
from teams.models import Membership, Team
from tests.factories import UserFactory, make_reviewer
from tests.provisioning.conftest import (  # noqa: F401 (fixtures for the cluster tests)
    ROOT,
    demo_flavors,
    eager,
    redis_url,
    workers,
)
from tests.waiting import stop
from tests.web.test_browser_journey import browser, page  # noqa: F401 (fixtures)


@pytest.fixture
def allowlist(db):
    for prefix in ("nvcr.io/nvidia/", "docker.io/library/"):
        ImageRule.objects.create(prefix=prefix)


@pytest.fixture
def nightly(admin_user, h100):
    """Every night 22:00-06:00 in New York, 8 H100 for batch."""
    return actions.save_window(
        None,
        by=admin_user,
        capacity={h100: 8},
        name="Nights",
        timezone="America/New_York",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=True,
    )


def job_data(**overrides):
    data = {
        "team": "vision",
        "name": "train-resnet",
        "flavor": "h100",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "args": ["--epochs", "3"],
        "env": [{"name": "EPOCHS", "value": "3"}],
        "gpus": 2,
        "parallelism": 1,
        "completions": 1,
        "expected_runtime_minutes": 120,
        "max_runtime_minutes": 180,
        "spot_allowed": False,
        "priority": 0,
    }
    return {**data, **overrides}


@pytest.fixture
def open_now(transactional_db, demo_flavors):  # noqa: F811 (imported fixtures)
    """alice of vision, and a window open now for two hours (H100 and L4, spot allowed)."""
    ImageRule.objects.create(prefix="docker.io/library/")
    team = Team.objects.create(slug="vision", name="Vision")
    alice = UserFactory(username="alice")
    Membership.objects.create(team=team, user=alice)
    admin = make_reviewer("admin")
    opens = (timezone.now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    window = actions.save_window(
        None,
        by=admin,
        capacity={demo_flavors["h100"]: 8, demo_flavors["l4"]: 8},
        name="Now",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=(opens + timedelta(hours=2)).time(),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=True,
    )
    return {"team": team, "alice": alice, "admin": admin, "window": window}


@pytest.fixture
def setup(open_now, backend, eager):  # noqa: F811 (imported fixtures)
    """`open_now` with kubesim, tasks run inline."""
    return open_now


FAST = {
    "PORTAL_BATCH_TICK_INTERVAL": "1",
    "PORTAL_BATCH_WATCH_SECONDS": "1",
    "PORTAL_SYNC_SWEEP_INTERVAL": "1",
    "PORTAL_LIFECYCLE_INTERVAL": "5",
}


# The portal on kubesim's clock (cluster/clock.py), read again every second.
SIM_CLOCK = {"PORTAL_CLOCK": "kubesim", "PORTAL_CLOCK_REFRESH": "1"}


def _beat(env, tmp_path):
    log_path = tmp_path / "beat.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "beat", "--loglevel=INFO",
             "--schedule", str(tmp_path / "beat-schedule")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        yield process
        stop(process)


@pytest.fixture
def beat(workers, tmp_path):  # noqa: F811 (imported fixtures)
    """A Celery beat process (ticks and watches every second), beside the workers."""
    yield from _beat({**workers.env, **FAST}, tmp_path)


@pytest.fixture
def sim_clock(backend, settings):
    """The portal on kubesim's clock, in this process (and its live server)."""
    settings.PORTAL_CLOCK = "kubesim"
    settings.PORTAL_CLOCK_REFRESH = 1
    clock.forget()
    yield SimClock(backend)
    clock.forget()


class SimClock:
    def __init__(self, sim):
        self.backend = sim

    def now(self):
        clock.forget()
        return clock.now()

    def advance(self, seconds):
        """Move kubesim's clock (and so the portal's) forward; the new now."""
        self.backend.pass_time(seconds)
        return self.now()

    def advance_to(self, moment):
        return self.advance(max(0.0, (moment - self.now()).total_seconds()))


@pytest.fixture
def sim_beat(sim_clock, workers, tmp_path):  # noqa: F811 (imported fixtures)
    """A beat process on kubesim's clock; start workers with `**SIM_WORKER`."""
    yield from _beat({**workers.env, **FAST, **SIM_CLOCK}, tmp_path)


SIM_WORKER = {**FAST, **SIM_CLOCK}
