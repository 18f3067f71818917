"""teams.hooks: other apps react to quota changes without gpu_requests importing them."""

import pytest
from django.db import transaction
from django.utils import timezone

from gpu_requests import actions
from teams import actions as team_actions
from teams import hooks
from tests.factories import submit


@pytest.fixture
def heard(monkeypatch):
    """Team ids a registered callback was called with, and whether it ran in a transaction."""
    calls = []

    def callback(team_id):
        calls.append((team_id, transaction.get_connection().in_atomic_block))

    monkeypatch.setattr(hooks, "_quota_changed", [*hooks._quota_changed])
    hooks.on_quota_changed(callback)
    hooks.on_quota_changed(callback)  # registering twice calls it once
    return calls


def test_an_approval_calls_the_callbacks_once_inside_its_transaction(
    heard, alice, vision, h100, admin_user
):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now())
    assert heard == []  # a pending request reserves nothing
    actions.approve(quota_request, by=admin_user)  # approved and activated: one change
    assert heard == [(vision.pk, True)]


def test_a_rejection_reserves_nothing_and_calls_nobody(heard, alice, vision, h100, admin_user):
    actions.reject(submit(vision, h100, alice), by=admin_user)
    assert heard == []


def test_archiving_calls_them_even_with_nothing_to_revoke(heard, vision, admin_user):
    team_actions.archive_team(vision, by=admin_user)
    assert heard == [(vision.pk, True)]


def test_a_callback_that_fails_undoes_the_change(monkeypatch, alice, vision, h100, admin_user):
    def broken(team_id):
        raise RuntimeError("outbox unavailable")

    monkeypatch.setattr(hooks, "_quota_changed", [broken])
    quota_request = submit(vision, h100, alice)
    with pytest.raises(RuntimeError):
        actions.approve(quota_request, by=admin_user)
    quota_request.refresh_from_db()
    assert quota_request.status == "pending"
    assert not quota_request.events.filter(action="approve").exists()


def test_the_sweep_calls_a_callback_once_per_team_or_its_set_based_twin_once(
    heard, monkeypatch, alice, carol, vision, nlp, bob, h100, admin_user
):
    from datetime import timedelta

    for team, user in [(vision, alice), (vision, carol), (nlp, bob)]:
        req = submit(team, h100, user, gpus=1, starts_at=timezone.now() + timedelta(minutes=1))
        actions.approve(req, by=admin_user)
    heard.clear()
    together = []
    monkeypatch.setattr(hooks, "_quota_changed_many", dict(hooks._quota_changed_many))
    hooks.on_quota_changed(lambda team_id: None, many=together.append)
    actions.advance_lifecycle(now=timezone.now() + timedelta(minutes=2))
    assert sorted(heard) == sorted([(vision.pk, True), (nlp.pk, True)])  # no twin: per team
    assert together == [sorted([vision.pk, nlp.pk])]  # the twin: once for both
