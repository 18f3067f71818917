"""End to end, with real Celery worker and beat processes, kubesim over HTTP and
Chromium: alice queues a job in the browser, the admin sees it in the calendar,
the window opens, the beat releases the Job, its pods run on the sim clock,
and alice sees it succeed.

The window opens at the next whole minute of the portal's clock (windows are
set in minutes), so this test waits for up to a minute and a quarter; the pods'
run time is sim time, advanced by the test.
"""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from batch import actions
from batch.models import BatchJob, ImageRule
from tests.provisioning.conftest import ROOT, wait_for
from tests.web.test_browser_journey import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.celery]

FAST = {
    "PORTAL_BATCH_TICK_INTERVAL": "1",
    "PORTAL_BATCH_WATCH_SECONDS": "1",
    "PORTAL_SYNC_SWEEP_INTERVAL": "1",
    "PORTAL_LIFECYCLE_INTERVAL": "5",
}


@pytest.fixture
def beat(workers, tmp_path):
    log_path = tmp_path / "beat.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "beat", "--loglevel=INFO",
             "--schedule", str(tmp_path / "beat-schedule")],
            cwd=ROOT,
            env={**workers.env, **FAST},
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        yield process
        process.terminate()
        process.wait(timeout=10)


def next_minute(after_seconds=15):
    soon = timezone.now() + timedelta(seconds=after_seconds)
    return soon.replace(second=0, microsecond=0) + timedelta(minutes=1)


def test_alice_queues_admin_sees_window_opens_alice_sees_it_succeed(
    workers, beat, kubesim, cluster, demo_flavors, page, alice, vision, admin_user
):
    workers.start("w1", **FAST)
    ImageRule.objects.create(prefix="docker.io/library/")
    opens = next_minute()
    actions.save_window(
        None,
        by=admin_user,
        capacity={demo_flavors["h100"]: 8},
        name="Lunch break",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=(opens + timedelta(hours=1)).time(),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )

    log_in(page, "alice")
    page.goto("/batch/jobs/new/")
    page.fill("#id_name", "embed-corpus")
    page.select_option("#id_flavor", str(demo_flavors["h100"].pk))
    page.fill("#id_image", "python:3.12-slim")
    page.fill("#id_command", "python\n-c\nprint('embedding')")
    page.fill("#id_gpus", "2")
    page.fill("#id_parallelism", "1")
    page.fill("#id_completions", "1")
    page.fill("#id_expected_runtime_minutes", "30")
    # 2 GPUs x 0.5 h x 2.00 on demand = 2.00; off-peak x 0.5.
    page.wait_for_selector("#job-feedback:has-text('1.00 USD')")
    shot(page, "batch_job_new")
    page.click("button:has-text('Queue job')")
    page.wait_for_selector("text=queued.")
    job = BatchJob.objects.get()
    BatchJob.objects.filter(pk=job.pk).update(annotations={"kubesim.io/duration": "2m"})

    # The worker plans it on submission and creates the Job, suspended.
    wait_for(lambda: BatchJob.objects.get(pk=job.pk).status == BatchJob.Status.PLANNED)
    live = wait_for(lambda: cluster.get("Job", f"batch-{job.pk}", "vision"), timeout=30)
    assert live["spec"]["suspend"] is True
    page.goto(f"/batch/jobs/{job.pk}/")
    page.wait_for_selector("#explanation:has-text('Planned for Lunch break')")
    shot(page, "batch_job_planned")

    page.click("button:has-text('Log out')")
    log_in(page, "admin")
    page.goto("/batch/")
    page.wait_for_selector("#calendar-h100 >> text=2 of 8")
    shot(page, "batch_calendar")
    page.click("button:has-text('Log out')")

    # The window opens: the beat releases the Job at its planned start.
    def unsuspended():
        found = cluster.get("Job", f"batch-{job.pk}", "vision")
        return found if found and found["spec"]["suspend"] is False else None

    released = wait_for(unsuspended, timeout=100, interval=0.5)
    assert released["spec"]["activeDeadlineSeconds"] == 30 * 60
    assert BatchJob.objects.get(pk=job.pk).released_at >= opens

    # Its pods run for two sim minutes; the watch records the outcome.
    def advance():
        kubesim._call("POST", "/_sim/clock", {"advance": 30})

    wait_for(
        lambda: BatchJob.objects.get(pk=job.pk).status == BatchJob.Status.SUCCEEDED,
        timeout=60,
        interval=0.5,
        every=advance,
    )
    log_in(page, "alice")
    page.goto(f"/batch/jobs/{job.pk}/")
    page.wait_for_selector("h1 .badge:has-text('Succeeded')")
    assert page.locator("pre.log").inner_text().strip()
    shot(page, "batch_job_succeeded")
