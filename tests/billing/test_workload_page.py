from datetime import UTC, datetime
from decimal import Decimal

import pytest

from cluster.models import Flavor
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
        "peak 9 GB of 80 GB and 12 % mean activity on an H100 80GB: a MIG 1g.10gb slice "
        "would have held it, for 0.15 USD instead of 2.00 USD" in page
    )
    assert "Busy while it ran, but on a bigger shape than it needed." in page
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


@pytest.fixture
def slice_3g(db):
    return FlavorFactory(
        slug="mig-3g",
        name="MIG 3g.40gb",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        memory_gb=40,
        sharing=Flavor.Sharing.MIG,
        resource_name="nvidia.com/mig-3g.40gb",
        price_per_gpu_hour=Decimal("1.1000"),
    )


def test_a_9_gb_notebook_on_an_a100_is_told_the_1g_slice(
    client, alice, vision, a100, slice_1g, slice_3g
):
    """Busy at 40 % for its first hour, idle for seven: the mean fits one slice
    of seven, the 9 GB peak fits 10 GB; its p95 would run slower there."""
    for hour, mean in ((9, 0.4), *((h, 0.01) for h in range(10, 17))):
        busy = mean > 0.05
        meter(
            HOUR.replace(hour=hour),
            teams={(vision, a100): (3600, 3600 if busy else 0, 0 if busy else 3600, 0)},
            workloads={
                (vision, "vision", "Pod", "notebook", a100): workload(
                    3600, 3600 if busy else 0, 0 if busy else 3600, mean=mean, fb_peak=9000
                )
            },
        )
    client.force_login(alice)
    page = client.get("/billing/teams/vision/workloads/vision/Pod/notebook/").content.decode()
    assert "on an A100 80GB: a MIG 1g.10gb slice would have held it (its busiest minutes" in page
    assert "3g.40gb" not in page
    # The verdict follows the figures: 7 of 8 GPU-hours idle is no "used what it held".
    assert "Idle 7 of its 8 GPU-hours (88 %): 17.50 USD paid for GPUs doing nothing." in page
    assert "used what it held" not in page.lower()


def test_the_whole_run_is_drawn_hour_by_hour_from_the_ledger(client, alice, vision, h100):
    meter(
        HOUR,
        teams={(vision, h100): (3600, 3600, 0, 0)},
        workloads={(vision, "vision", "Job", "train", h100): workload(3600, 3600, mean=0.9)},
    )
    meter(
        HOUR.replace(hour=11),
        teams={(vision, h100): (3600, 0, 3600, 0)},
        workloads={(vision, "vision", "Job", "train", h100): workload(3600, 0, 3600, mean=0.0)},
    )
    client.force_login(alice)
    page = client.get(URL).content.decode()
    run = page[page.index('id="whole-run"') : page.index('id="recent"')]
    assert "10 Nov 09:00–10 Nov 10:00: 1 GPU, 90 % active, 0 of 1 GPU-hours idle" in run
    assert "10 Nov 11:00–10 Nov 12:00: 1 GPU, 0 % active, 1 of 1 GPU-hours idle" in run
    assert "The picture as a table" in run


def test_grammar_of_model_names():
    from teams.formats import with_article

    assert [with_article(n) for n in ("A100 80GB", "H100", "L4", "T4 shared", "MIG 1g.10gb")] == [
        "an A100 80GB",
        "an H100",
        "an L4",
        "a T4 shared",
        "a MIG 1g.10gb",
    ]
