"""Emails to the submitters of batch jobs, driven by the real flow against kubesim
over HTTP (tasks inline, Django's locmem outbox): released at the opening (one
email per person), finished and why, preempted back to the queue, moved by the
planner. Planning itself sends nothing."""

from datetime import timedelta

import pytest

from batch import actions, launch
from batch.models import BatchJob
from teams.models import Membership
from tests.batch.test_cluster import (
    LONG,
    reclaim_its_node,
    record_as_the_portal,
    submit,
    watch_until,
)
from tests.factories import UserFactory
from tests.provisioning.conftest import wait_for

Status = BatchJob.Status


def test_released_then_succeeded(setup, demo_flavors, backend, mailoutbox):
    job = submit(setup, demo_flavors["h100"], parallelism=1, completions=1)
    assert BatchJob.objects.get(pk=job.pk).status == Status.PLANNED
    assert mailoutbox == []  # planned at once, shown on the page: no email

    launch.release_due()
    (released,) = mailoutbox
    assert released.to == ["alice@example.com"]
    assert released.subject == f"[GPU portal] Batch job #{job.pk} train released"
    assert "The window opened" in released.body
    assert "at the latest: its maximum runtime of 60 minutes." in released.body
    assert f"/batch/jobs/{job.pk}/" in released.body

    watch_until(job, {Status.SUCCEEDED}, backend, advance_by=300)
    finished = mailoutbox[1]
    assert finished.subject == f"[GPU portal] Batch job #{job.pk} train succeeded"
    assert "Completed." in finished.body and "GPU-hours" in finished.body
    assert len(mailoutbox) == 2


def test_a_burst_is_one_email_per_person(setup, demo_flavors, mailoutbox):
    bob = UserFactory(username="bob")
    Membership.objects.create(team=setup["team"], user=bob)
    mine = [submit(setup, demo_flavors["l4"], name=f"sweep-{n}") for n in range(3)]
    theirs = submit({**setup, "alice": bob}, demo_flavors["l4"], name="eval")
    mailoutbox.clear()

    launch.release_due()
    by_person = {tuple(m.to): m for m in mailoutbox}
    assert sorted(by_person) == [("alice@example.com",), ("bob@example.com",)]
    alice_mail = by_person[("alice@example.com",)]
    assert alice_mail.subject == "[GPU portal] 3 batch jobs released"
    assert all(f"#{job.pk} sweep-" in alice_mail.body for job in mine)
    assert f"#{theirs.pk}" not in alice_mail.body


def test_a_name_with_a_line_break_stops_no_one_elses_email(setup, demo_flavors, mailoutbox):
    bob = UserFactory(username="bob")
    Membership.objects.create(team=setup["team"], user=bob)
    first = submit(setup, demo_flavors["l4"], name="sweep")
    submit({**setup, "alice": bob}, demo_flavors["l4"], name="eval")
    # A name stored before control characters were refused at input: alice's email,
    # the first of the opening, raised BadHeaderError and bob's was never sent.
    BatchJob.objects.filter(pk=first.pk).update(name="sweep\r\nBcc: everyone@example.com")
    mailoutbox.clear()

    launch.release_due()
    by_person = {tuple(m.to): m for m in mailoutbox}
    assert sorted(by_person) == [("alice@example.com",), ("bob@example.com",)]
    subject = by_person[("alice@example.com",)].subject
    assert (
        subject == f"[GPU portal] Batch job #{first.pk} sweep  Bcc: everyone@example.com released"
    )
    assert not by_person[("alice@example.com",)].bcc


@pytest.mark.kubesim_only(
    "the job runs to a 20-minute deadline: kubesim's clock gets there at once"
)
def test_a_late_release_says_the_close_binds_and_the_deadline_is_explained(
    setup, demo_flavors, backend, mailoutbox
):
    job = submit(setup, demo_flavors["h100"], annotations={"kubesim.io/duration": "3h"})
    job.refresh_from_db()
    # Released 100 minutes into the two-hour window: 20 minutes are left.
    late = job.opens_at + timedelta(minutes=100)
    launch.release_due(late)
    (released,) = mailoutbox
    assert "at the latest: the window's close, before its maximum runtime" in released.body

    watch_until(job, {Status.DEADLINE_EXCEEDED}, backend, advance_by=600)
    finished = mailoutbox[1]
    assert finished.subject == f"[GPU portal] Batch job #{job.pk} train deadline exceeded"
    assert "Stopped at its deadline" in finished.body


def test_a_reclaim_it_does_not_tolerate_tells_it_is_queued_again(
    setup, demo_flavors, cluster, backend, mailoutbox
):
    job = submit(setup, demo_flavors["h100"], parallelism=1, completions=1, annotations=LONG)
    reclaim_its_node(job, cluster, backend)

    def preempted_mail():
        record_as_the_portal(job, cluster)
        return [m for m in mailoutbox if "preempted" in m.subject]

    (mail,) = wait_for(preempted_mail)
    assert mail.subject == f"[GPU portal] Batch job #{job.pk} train preempted and queued again"
    assert "Pods lost to a disruption (spot reclaim or drain)." in mail.body
    assert "GPU-minutes were lost" in mail.body
    assert not [m for m in mailoutbox if "succeeded" in m.subject or "failed" in m.subject]


def test_a_job_moved_out_of_its_window_by_higher_priority_work(setup, demo_flavors, mailoutbox):
    first = submit(setup, demo_flavors["h100"], gpus=8, parallelism=1, completions=1)
    first.refresh_from_db()
    assert first.status == Status.PLANNED
    window_opening = first.opens_at
    # Higher priority, the whole window's GPUs for 90 of its remaining minutes:
    # the first no longer fits today and moves to tomorrow's occurrence.
    urgent = submit(
        setup,
        demo_flavors["h100"],
        name="urgent",
        gpus=8,
        parallelism=1,
        completions=1,
        expected_runtime_minutes=90,
        max_runtime_minutes=90,
        priority=5,
    )
    first.refresh_from_db()
    assert first.opens_at == window_opening + timedelta(days=1)
    (mail,) = mailoutbox
    assert mail.subject == f"[GPU portal] Batch job #{first.pk} train moved"
    assert f"Was planned for Now, {window_opening:%a %d %b %H:%M} UTC." in mail.body
    assert "Did not fit" in mail.body and "Planned for Now" in mail.body
    assert f"#{urgent.pk}" not in mail.body
    actions.replan(reason="again")  # the same plan: nothing moved, no email
    assert len(mailoutbox) == 1
