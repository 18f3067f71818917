from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gpu_requests.models import Flavor
from tests.billing.ledger import meter, workload
from tests.factories import FlavorFactory

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)
URL = "/billing/teams/vision/workloads/vision/Job/train/"


@pytest.fixture
def slice_1g(db):
    return FlavorFactory(
        slug="mig-1g",
        name="MIG 1g.10gb",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        memory_gb=10,
        sharing=Flavor.Sharing.MIG,
        resource_name="nvidia.com/mig-1g.10gb",
        price_per_gpu_hour=Decimal("0.3000"),
    )


def test_a_small_job_on_a_big_gpu_gets_a_mig_hint(client, alice, vision, h100, slice_1g):
    # Half an hour of one H100 at 12 % activity and 9 GB peak.
    meter(
        HOUR,
        teams={(vision, h100): (1800, 1800, 0, 0)},
        workloads={
            (vision, "vision", "Job", "train", h100): workload(
                1800, 1800, mean=0.12, fb_peak=9 * 1024
            )
        },
    )
    client.force_login(alice)
    page = client.get(URL).content.decode()
    assert "mean 12 %" in page and "9,216 MiB" in page
    assert (
        "peak 9 GB of 80 GB and 12 % activity: a MIG 1g.10gb slice would have cost "
        "0.15 USD instead of 2.00 USD" in page
    )
    assert "Saving: 1.85 USD" in page


def test_an_idle_job_gets_an_idle_hint(client, alice, vision, h100):
    meter(
        HOUR,
        teams={(vision, h100): (8 * 3600, 0, 8 * 3600, 0)},
        workloads={
            (vision, "vision", "Job", "train", h100): workload(
                8 * 3600, 0, 8 * 3600, gpus=8, mean=0.0, fb_peak=70 * 1024
            )
        },
    )
    client.force_login(alice)
    page = client.get(URL).content.decode()
    assert "idle 100 % of its GPU time: 32.00 USD paid for GPUs doing nothing" in page


def test_other_teams_and_unknown_workloads_are_404(client, bob, alice, vision, h100):
    meter(HOUR, workloads={(vision, "vision", "Job", "train", h100): workload(60, 60)})
    client.force_login(bob)
    assert client.get(URL).status_code == 404
    client.force_login(alice)
    assert client.get(URL.replace("train", "nope")).status_code == 404


def test_the_card_shows_the_p95_of_every_hour_together(client, alice, vision, h100):
    # 30 minutes at 12 %, then 10 minutes at 80 %: the 95th percentile of the
    # 40 metered minutes lies in the busy ones, the mean between.
    meter(
        HOUR,
        teams={(vision, h100): (1800, 1800, 0, 0)},
        workloads={(vision, "vision", "Job", "train", h100): workload(1800, 1800, mean=0.12)},
    )
    later = HOUR.replace(hour=10)
    meter(
        later,
        teams={(vision, h100): (600, 600, 0, 0)},
        workloads={(vision, "vision", "Job", "train", h100): workload(600, 600, mean=0.8)},
    )
    client.force_login(alice)
    page = client.get(URL, {"month": "2026-11"}).content.decode()
    assert "mean 29 %, p95 ≤ 81 %" in page
