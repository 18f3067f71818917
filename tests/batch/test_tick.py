"""The beat's tick: plans when stale or at the lead time before an occurrence."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from batch import actions
from batch.models import PlannerState


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
