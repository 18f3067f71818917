"""The beat's tick: plans when stale or at the lead time before an occurrence."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from batch import actions
from batch.models import BatchJob, PlannerState


def test_it_plans_at_the_lead_time_before_an_occurrence(nightly, settings):
    settings.PORTAL_BATCH_PLAN_LEAD = 900
    now = timezone.now()
    actions.replan(reason="fresh", now=now)
    assert not actions.plan_due(now)
    upcoming = next(
        o
        for o in nightly.occurrences(now, now + timedelta(days=3))
        if o.opens_at > now + timedelta(hours=1)
    )
    with time_machine.travel(upcoming.opens_at - timedelta(minutes=20), tick=False):
        assert not actions.plan_due(timezone.now())
    with time_machine.travel(upcoming.opens_at - timedelta(minutes=10), tick=False):
        assert actions.plan_due(timezone.now())
        assert actions.tick()["planned"] is True
        assert not actions.plan_due(timezone.now())


def test_a_submission_marks_the_plan_stale(nightly, allowlist, alice, vision, h100):
    actions.replan(reason="fresh")
    PlannerState.objects.update(dirty=False)
    actions.request_plan("test")
    assert actions.plan_due(timezone.now())


def queue(user, team, flavor, gpus, count):
    for n in range(count):
        actions.submit(
            by=user,
            team=team,
            flavor=flavor,
            name=f"{team.slug}-{n}",
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            command=["python", "train.py"],
            args=[],
            env=[],
            gpus=gpus,
            parallelism=1,
            completions=1,
            expected_runtime_minutes=7 * 60,
            max_runtime_minutes=7 * 60,
            spot_allowed=False,
            priority=0,
        )


def test_a_team_is_not_starved_across_successive_nights(
    nightly, allowlist, vision, alice, nlp, bob, h100
):
    """Night after night the tick plans at the lead time and releases at the opening.
    Each run alone puts vision first (no usage yet, the lower id); its first 4-GPU
    job leaves no room for nlp's 8-GPU job. nlp's wait, stored with the planner's
    state, puts it first the next night."""
    queue(alice, vision, h100, gpus=4, count=8)
    queue(bob, nlp, h100, gpus=8, count=1)
    now = timezone.now()
    nights = [o for o in nightly.occurrences(now, now + timedelta(days=6))]
    nights = [o for o in nights if o.opens_at > now + timedelta(hours=1)][:4]
    released = {}
    for night in nights:
        with time_machine.travel(night.opens_at - timedelta(minutes=10), tick=False):
            assert actions.tick()["planned"] is True
        with time_machine.travel(night.opens_at + timedelta(minutes=1), tick=False):
            assert actions.tick()["planned"] is False  # the plan of the lead time stands
        released[night.opens_at] = set(
            BatchJob.objects.filter(
                opens_at=night.opens_at, status=BatchJob.Status.RELEASED
            ).values_list("team__slug", flat=True)
        )
    assert list(released.values()) == [{"vision"}, {"nlp"}, {"vision"}, {"vision"}]
