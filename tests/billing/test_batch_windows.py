"""Batch windows in the ledger: a batch Job inside its window is priced with the
window's off-peak factor, and what the window set aside but nobody used is the
platform's "batch set-aside unused" line."""

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import time_machine

from batch import actions as batch_actions
from batch.models import ImageRule
from billing.models import FlavorHour, TeamUsage, WorkloadUsage
from tests.billing.ledger import meter, workload

HOUR = datetime(2026, 11, 2, 10, tzinfo=UTC)


def test_a_batch_job_in_its_window_is_priced_off_peak(vision, alice, admin_user, h100):
    ImageRule.objects.create(prefix="nvcr.io/nvidia/")
    with time_machine.travel(HOUR - timedelta(hours=3), tick=False):
        batch_actions.save_window(
            None,
            by=admin_user,
            capacity={h100: 4},
            name="Mornings",
            timezone="UTC",
            days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            start_time=time(10),
            end_time=time(12),
            exceptions=[],
            price_factor="0.5",
            spot_allowed=False,
        )
        job = batch_actions.submit(
            by=alice,
            team=vision,
            flavor=h100,
            name="sweep",
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            command=["python"],
            args=[],
            env=[],
            gpus=2,
            parallelism=1,
            completions=1,
            expected_runtime_minutes=60,
            max_runtime_minutes=90,
            spot_allowed=False,
            priority=0,
        )
        batch_actions.replan(now=HOUR - timedelta(hours=3))
    job.refresh_from_db()
    assert job.opens_at == HOUR

    # The hour: the batch Job on 2 H100s, and an interactive notebook on 1.
    meter(
        HOUR,
        teams={(vision, h100): (3 * 3600, 3 * 3600, 0, 0)},
        workloads={
            (vision, "vision", "Job", job.kubernetes_name, h100): workload(
                2 * 3600, 2 * 3600, gpus=2
            ),
            (vision, "vision", "Pod", "notebook", h100): workload(3600, 3600),
        },
        capacity={h100.pk: 16 * 3600},
    )
    batch_row = WorkloadUsage.objects.get(name=job.kubernetes_name)
    assert batch_row.price == Decimal("2.0000")  # 4.00 x 0.5
    assert WorkloadUsage.objects.get(name="notebook").price == Decimal("4.0000")
    team = TeamUsage.objects.get(hour=HOUR)
    assert team.price_factor == Decimal("0.666667")  # (2 x 0.5 + 1) / 3
    assert team.price == Decimal("2.6667")
    line = FlavorHour.objects.get(hour=HOUR, flavor=h100)
    assert line.batch_set_aside_unused_seconds == 4 * 3600 - 2 * 3600
    assert line.unreserved_seconds == 16 * 3600 - 3 * 3600 - 2 * 3600
