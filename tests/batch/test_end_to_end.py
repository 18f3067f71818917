"""End to end, with real Celery worker and beat processes, kubesim over HTTP and
Chromium: alice queues a job in the browser, the admin sees it in the calendar,
the window opens, the beat releases the Job, its pods run on the sim clock,
and alice sees it succeed.

The portal runs on kubesim's clock (PORTAL_CLOCK=kubesim, cluster/clock.py): the
window is set ten minutes ahead of the sim clock, and opens when the test moves
that clock forward, long before the real clock gets there; the pods' run time
is sim time too.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from batch import actions
from batch.models import BatchJob, ImageRule
from tests.batch.conftest import SIM_WORKER
from tests.provisioning.conftest import wait_for
from tests.web.test_browser_journey import log_in, shot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.celery,
    pytest.mark.kubesim_only(
        "the portal runs on kubesim's clock, which the test moves to the window"
    ),
]


def test_alice_queues_admin_sees_window_opens_alice_sees_it_succeed(
    workers, sim_clock, sim_beat, backend, cluster, demo_flavors, page, alice, vision, admin_user
):
    workers.start("w1", **SIM_WORKER)
    ImageRule.objects.create(prefix="docker.io/library/")
    # Windows are set in minutes: ten sim minutes ahead, on a whole minute.
    ahead = sim_clock.now() + timedelta(minutes=10)
    opens = ahead.replace(second=0, microsecond=0)
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

    # Nothing is released before the window opens on the sim clock ...
    assert BatchJob.objects.get(pk=job.pk).status == BatchJob.Status.PLANNED
    # ... which the test moves to the opening; the beat releases the Job at its
    # planned start, minutes before the real clock would reach it.
    sim_clock.advance_to(opens + timedelta(seconds=1))

    def unsuspended():
        found = cluster.get("Job", f"batch-{job.pk}", "vision")
        return found if found and found["spec"]["suspend"] is False else None

    released = wait_for(unsuspended, timeout=30, interval=0.5)
    assert released["spec"]["activeDeadlineSeconds"] == 30 * 60
    released_at = BatchJob.objects.get(pk=job.pk).released_at
    assert opens <= released_at < opens + timedelta(minutes=1)
    assert timezone.now() < opens  # the real clock is not there yet

    # Its pods run for two sim minutes; the watch records the outcome.
    def advance():
        backend.pass_time(30)

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
