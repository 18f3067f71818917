"""The idle notice on a workload's report card, from its idle state."""

from datetime import UTC, datetime, timedelta

import pytest

from idle import actions
from idle.models import IdleState
from tests.billing.ledger import meter, workload

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)
CARD = "/billing/teams/vision/workloads/vision/Deployment/notebook/"


@pytest.fixture
def metered(vision, h100):
    meter(
        HOUR,
        workloads={(vision, "vision", "Deployment", "notebook", h100): workload(3600, 0, 3600)},
    )


def state(vision, h100, **fields):
    return IdleState.objects.create(
        team=vision,
        flavor=h100,
        namespace="vision",
        kind="Deployment",
        name="notebook",
        gpus=1,
        seen_at=HOUR,
        idle_since=HOUR,
        **fields,
    )


def test_no_banner_while_it_is_not_announced(client, alice, vision, h100, metered):
    state(vision, h100)
    client.force_login(alice)
    assert 'id="idle-banner"' not in client.get(CARD).content.decode()


def test_an_announced_workload_says_when_the_policy_acts(
    client, alice, admin_user, vision, h100, metered
):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    due = HOUR + timedelta(minutes=15)
    state(vision, h100, announced_at=HOUR + timedelta(minutes=10), action_due_at=due)
    client.force_login(alice)
    page = client.get(CARD).content.decode()
    assert 'id="idle-banner"' in page and "the idle policy acts at" in page
    assert "Bring it back" not in page


def test_report_only_says_nothing_will_be_done(client, alice, admin_user, vision, h100, metered):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report")
    state(vision, h100, announced_at=HOUR, action_due_at=HOUR + timedelta(minutes=5))
    client.force_login(alice)
    assert "nothing will be done to it" in client.get(CARD).content.decode()


def test_bring_back_is_post_only_and_for_the_team(client, alice, bob, vision, h100, metered):
    scaled = state(vision, h100, announced_at=HOUR, action_due_at=HOUR, acted_at=HOUR)
    client.force_login(alice)
    assert client.get(f"/idle/states/{scaled.pk}/bring-back/").status_code == 405
    client.force_login(bob)
    assert client.post(f"/idle/states/{scaled.pk}/bring-back/").status_code == 404
    assert (
        client.post(
            "/api/v1/idle-states/999999/bring-back/", content_type="application/json"
        ).status_code
        == 404
    )


def test_a_manager_exempts_it_from_the_report_card(
    client, alice, carol, admin_user, vision, h100, metered
):
    from idle.models import Exemption
    from teams.models import AuditEvent

    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    idle = state(vision, h100, announced_at=HOUR, action_due_at=HOUR + timedelta(minutes=5))
    client.force_login(alice)
    assert 'id="exempt"' not in client.get(CARD).content.decode()
    assert (
        client.post(f"/idle/states/{idle.pk}/exempt/", {"hours": "2", "reason": "x"}).status_code
        == 403
    )
    client.force_login(carol)
    assert 'id="exempt"' in client.get(CARD).content.decode()
    for bad in (
        {"hours": "٢", "reason": "demo"},
        {"hours": "9" * 40, "reason": "demo"},
        {"hours": "2", "reason": " "},
        {"hours": "2", "reason": "a\x00"},
    ):
        page = client.post(f"/idle/states/{idle.pk}/exempt/", bad, follow=True).content.decode()
        assert "Not exempted" in page
    page = client.post(
        f"/idle/states/{idle.pk}/exempt/", {"hours": "48", "reason": "demo on Friday"}, follow=True
    ).content.decode()
    assert "Deployment notebook is exempt for 48 hour(s)." in page
    exemption = Exemption.objects.get()
    assert (exemption.reason, exemption.created_by) == ("demo on Friday", carol)
    assert AuditEvent.objects.filter(action="idle_exempt", actor=carol).exists()


def test_bring_back_without_a_cluster_is_a_503_and_changes_nothing(
    client, alice, vision, h100, metered, settings
):
    settings.PORTAL_KUBECONFIG = ""  # nothing to talk to
    scaled = state(
        vision, h100, announced_at=HOUR, action_due_at=HOUR, acted_at=HOUR, previous_replicas=2
    )
    client.force_login(alice)
    response = client.post(
        f"/api/v1/idle-states/{scaled.pk}/bring-back/", content_type="application/json"
    )
    assert response.status_code == 503
    assert response.json()["detail"].startswith("The cluster did not take it; try again.")
    assert IdleState.objects.filter(pk=scaled.pk, acted_at=HOUR).exists()  # still scaled down
    page = client.post(f"/idle/states/{scaled.pk}/bring-back/", follow=True)
    assert page.status_code == 200
    assert "The cluster did not take it" in page.content.decode()


def test_bring_back_without_a_record_of_the_replicas_says_so(
    client, alice, vision, h100, metered, settings
):
    """What "Bring it back" restores is the portal's record, never the object's
    annotation (any member can write it): without one it asks no cluster."""
    settings.PORTAL_KUBECONFIG = ""  # nothing to talk to: not asked
    scaled = state(vision, h100, announced_at=HOUR, action_due_at=HOUR, acted_at=HOUR)
    client.force_login(alice)
    response = client.post(
        f"/api/v1/idle-states/{scaled.pk}/bring-back/", content_type="application/json"
    )
    assert response.status_code == 409
    assert "no record of the replicas it had" in response.json()["detail"]
    assert IdleState.objects.filter(pk=scaled.pk, acted_at=HOUR).exists()
