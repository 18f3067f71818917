"""Giving active quota back: `actions.end_early`, its page, its API and two clicks at once.

Alice (member) asked for the quota, carol manages vision, dave is a member who did
not ask, bob is in another team.
"""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from billing.actions import reserved_seconds
from gpu_requests import actions, capacity
from gpu_requests.models import QuotaAction, QuotaRequest
from teams.errors import IllegalTransition, NotAllowed
from teams.models import AuditEvent
from tests.api.test_concurrent_approval import run_together
from tests.factories import UserFactory, add_member, submit

START = datetime(2026, 11, 2, 9, tzinfo=UTC)
GIVEN_BACK = START + timedelta(days=1, hours=3, minutes=30)


@pytest.fixture
def dave(vision):
    return add_member(vision, UserFactory(username="dave"))


@pytest.fixture
def active(vision, alice, h100, admin_user):
    """Alice's 4 x H100 for vision, from START for 30 days, active."""
    with time_machine.travel(START, tick=False):
        quota_request = submit(vision, h100, alice, gpus=4, starts_at=START, hours=30 * 24)
        return actions.approve(quota_request, by=admin_user)


def ended(quota_request):
    return AuditEvent.objects.filter(subject_id=str(quota_request.pk), action=QuotaAction.END_EARLY)


def test_it_ends_the_quota_now_with_an_audit_event(active, carol):
    with time_machine.travel(GIVEN_BACK, tick=False):
        actions.end_early(QuotaRequest.objects.get(pk=active.pk), by=carol, reason="Slipped")

    active.refresh_from_db()
    assert active.status == QuotaRequest.Status.EXPIRED
    assert active.ends_at == GIVEN_BACK
    (event,) = ended(active)
    assert (event.actor, event.from_status, event.to_status) == (carol, "active", "expired")
    assert event.reason == "Given back (was until 2026-12-02 09:00 UTC). Slipped"
    # The capacity is free for everyone from now on ...
    assert capacity.peak_reserved(active.flavor, GIVEN_BACK, START + timedelta(days=30)) == 0
    # ... and the ledger counts the quota up to its new end, not its old one.
    hour = GIVEN_BACK.replace(minute=0)
    key = (active.team_id, active.flavor_id)
    assert reserved_seconds(hour)[key] == 4 * 30 * 60
    assert key not in reserved_seconds(hour + timedelta(hours=1))


def test_quota_past_its_end_keeps_its_end(active, carol):
    """The sweep has not expired it yet: giving it back does not lengthen it."""
    end = active.ends_at
    with time_machine.travel(end + timedelta(minutes=2), tick=False):
        actions.end_early(QuotaRequest.objects.get(pk=active.pk), by=carol)
    assert QuotaRequest.objects.get(pk=active.pk).ends_at == end


def test_the_requester_managers_and_admins_may_and_other_members_may_not(
    active, alice, carol, dave, bob, admin_user
):
    for who in (alice, carol, admin_user):
        assert actions.can_end_early(who, active)
    for who in (dave, bob):
        with pytest.raises(NotAllowed, match="requester, a team manager or a platform admin"):
            actions.end_early(QuotaRequest.objects.get(pk=active.pk), by=who)
    assert QuotaRequest.objects.get(pk=active.pk).status == QuotaRequest.Status.ACTIVE


def test_only_active_quota_ends_early(vision, alice, h100, admin_user):
    pending = submit(vision, h100, alice, gpus=1)
    with pytest.raises(IllegalTransition, match="is pending; only active requests can be ended"):
        actions.end_early(pending, by=alice)
    approved = actions.approve(submit(vision, h100, alice, gpus=1), by=admin_user)
    with pytest.raises(IllegalTransition, match="is approved; only active"):
        actions.end_early(approved, by=alice)
    assert not AuditEvent.objects.filter(action=QuotaAction.END_EARLY).exists()


def test_it_posts_from_a_page_and_goes_back_there(active, client, carol, dave):
    url = f"/requests/{active.pk}/end-early/"
    client.force_login(dave)
    assert client.post(url, {"next": "/"}).status_code == 403
    client.force_login(carol)
    confirm = client.get(url)
    assert f"End request #{active.pk}&#x27;s quota now?" in confirm.content.decode()
    assert QuotaRequest.objects.get(pk=active.pk).status == QuotaRequest.Status.ACTIVE

    response = client.post(url, {"next": "/billing/teams/vision/"}, follow=True)
    assert response.redirect_chain[0] == ("/billing/teams/vision/", 302)
    assert f"Request #{active.pk} ended early." in response.content.decode()
    again = client.post(url, {"next": "/"}, follow=True).content.decode()
    assert f"Request #{active.pk} is expired; only active requests can be ended early." in again


def test_the_api_ends_it_for_the_requester(active, alice, dave):
    api = APIClient()
    api.force_authenticate(dave)
    refused = api.post(
        f"/api/v1/quota-requests/{active.pk}/end-early/", {"reason": "done"}, format="json"
    )
    assert refused.status_code == 403
    api.force_authenticate(alice)
    answer = api.post(
        f"/api/v1/quota-requests/{active.pk}/end-early/", {"reason": "done"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "expired"
    assert api.post(f"/api/v1/quota-requests/{active.pk}/end-early/").status_code == 409


@pytest.mark.postgres
def test_two_clicks_at_once_end_it_once(transactional_db, vision, alice, carol, h100, admin_user):
    now = datetime.now(UTC).replace(microsecond=0)
    quota_request = actions.approve(
        submit(vision, h100, alice, gpus=4, starts_at=now, hours=48), by=admin_user
    )
    people = [carol.pk, admin_user.pk]

    def click(i):
        client = Client()
        client.force_login(get_user_model().objects.get(pk=people[i]))
        response = client.post(
            f"/requests/{quota_request.pk}/end-early/", {"next": "/"}, follow=True
        )
        return response.status_code, response.content.decode()

    results = run_together(click, 2)
    assert [code for code, _ in results] == [200, 200]
    said = sorted(
        "ended early." if f"#{quota_request.pk} ended early." in page else "refused"
        for _, page in results
        if f"#{quota_request.pk} ended early." in page or "is expired; only active" in page
    )
    assert said == ["ended early.", "refused"]
    assert ended(quota_request).count() == 1
    quota_request.refresh_from_db()
    assert quota_request.status == QuotaRequest.Status.EXPIRED
    assert now < quota_request.ends_at < now + timedelta(hours=1)
