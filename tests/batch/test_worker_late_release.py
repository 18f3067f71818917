"""A late release with real Celery worker and beat processes, on kubesim's clock
(the portal reads it: PORTAL_CLOCK=kubesim). The job fills its window to the
close, but the release comes 45 minutes late (as after an outage of the beat):
the time left to the close, not the maximum runtime, is its
activeDeadlineSeconds, and the Job controller stops it at the close."""

from datetime import datetime, timedelta

import pytest

from batch import actions
from batch.models import BatchJob
from tests.batch.conftest import SIM_WORKER
from tests.batch.test_cluster import status_of, submit
from tests.provisioning.conftest import wait_for

pytestmark = [
    pytest.mark.celery,
    pytest.mark.kubesim_only(
        "the portal runs on kubesim's clock, which the test moves to the window"
    ),
]
Status = BatchJob.Status


def test_a_late_release_gets_the_time_to_the_close_as_its_deadline(
    open_now, workers, sim_clock, sim_beat, demo_flavors, cluster
):
    opens = (sim_clock.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)
    closes = opens + timedelta(hours=1)
    actions.save_window(
        None,
        by=open_now["admin"],
        capacity={demo_flavors["a100"]: 4},
        name="Late",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=closes.time(),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    workers.start("w1", **SIM_WORKER)
    # Its maximum runtime is the whole window: planned from the opening to the close.
    job = submit(
        open_now,
        demo_flavors["a100"],
        parallelism=1,
        completions=1,
        expected_runtime_minutes=30,
        max_runtime_minutes=60,
        annotations={"kubesim.io/duration": "3h"},
    )
    wait_for(lambda: status_of(job) == Status.PLANNED, timeout=30, interval=0.3)
    job.refresh_from_db()
    assert (job.planned_start, job.planned_end) == (opens, closes)
    live = wait_for(lambda: cluster.get("Job", f"batch-{job.pk}", "vision"), timeout=30)
    assert live["spec"]["suspend"] is True

    # The sim clock jumps 45 minutes past the planned start before any tick ran.
    late = sim_clock.advance_to(opens + timedelta(minutes=45))
    wait_for(lambda: status_of(job) == Status.RUNNING, timeout=30, interval=0.3)
    job.refresh_from_db()
    assert job.released_at >= late
    left = int((closes - job.released_at).total_seconds())
    assert job.deadline_seconds == left < 60 * 60  # the close binds, not the maximum runtime
    assert 13 * 60 < left <= 15 * 60
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["activeDeadlineSeconds"] == job.deadline_seconds
    release = job.events.get(action="release")
    assert f"activeDeadlineSeconds {job.deadline_seconds}" in release.reason

    # Half a minute before the close it still runs; just after, the Job controller
    # (sim clock) has stopped it with DeadlineExceeded, and the watch records that.
    sim_clock.advance_to(closes - timedelta(seconds=30))
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert not [c for c in live["status"].get("conditions") or [] if c["type"] == "Failed"]
    sim_clock.advance_to(closes + timedelta(seconds=5))
    # The pods get their 30 s (sim) of grace before the Job is Failed.
    wait_for(
        lambda: status_of(job) == Status.DEADLINE_EXCEEDED,
        timeout=30,
        interval=0.3,
        every=lambda: sim_clock.advance(5),
    )
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    conditions = {c["type"]: c for c in live["status"]["conditions"]}
    assert conditions["Failed"]["reason"] == "DeadlineExceeded"
    # Stopped at the close (the resume came a moment after the release), not an
    # hour after its release as the maximum runtime alone would have let it run.
    stopped = datetime.fromisoformat(conditions["FailureTarget"]["lastTransitionTime"])
    # (kubesim's controller notices within seconds of sim time; the clock moves in 5s.)
    assert closes - timedelta(seconds=2) <= stopped <= closes + timedelta(seconds=30)
