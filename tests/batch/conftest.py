from datetime import time

import pytest

from batch import actions
from batch.models import ImageRule
from tests.provisioning.conftest import (  # noqa: F401 (fixtures for the cluster tests)
    cluster,
    demo_flavors,
    eager,
    kubesim,
    redis_url,
    workers,
)
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
