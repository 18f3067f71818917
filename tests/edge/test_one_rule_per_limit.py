"""One rule per limit: a cap holds at every door (the web form, the API, the
Django admin), because it lives in one place that all of them use.

- An idle exemption's longest duration (`idle.models.MAX_EXEMPTION`) and its
  reason's length were the report card's only: the API took an exemption for
  a hundred years. Both are in `idle.actions.exempt` now (the admin only reads
  exemptions).
- A team's monthly budget (`billing.models.BUDGET_VALIDATORS`): the admin saved
  it around the action (no audit event, no lock); the API took 0 and left the
  action to refuse it in other words.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from billing import actions as billing_actions
from billing.models import Budget
from idle.models import MAX_EXEMPTION, Exemption, IdleState
from teams.inputs import MAX_TEXT_LENGTH
from teams.models import AuditEvent
from tests.factories import UserFactory

# --- an idle exemption: how long, and its reason ---

EXEMPTIONS = "/api/v1/idle-exemptions/"


def exemption(**changes):
    return {
        "team": "vision",
        "namespace": "vision",
        "kind": "Deployment",
        "name": "notebook",
        "until": (timezone.now() + timedelta(days=1)).isoformat(),
        "reason": "demo on Friday",
        **changes,
    }


def test_the_api_refuses_an_exemption_longer_than_the_longest(client, carol, vision):
    client.force_login(carol)
    too_long = (timezone.now() + MAX_EXEMPTION + timedelta(hours=1)).isoformat()
    response = client.post(EXEMPTIONS, exemption(until=too_long), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["until"] == ["Exempt for at most 31 days from now."]
    hundred_years = (timezone.now() + timedelta(days=36500)).isoformat()
    response = client.post(
        EXEMPTIONS, exemption(until=hundred_years), content_type="application/json"
    )
    assert response.status_code == 400 and "until" in response.json()
    assert not Exemption.objects.exists()
    just_in = (timezone.now() + MAX_EXEMPTION - timedelta(minutes=5)).isoformat()
    ok = client.post(EXEMPTIONS, exemption(until=just_in), content_type="application/json")
    assert ok.status_code == 201, ok.json()


def test_the_api_refuses_a_reason_past_the_text_limit(client, carol, vision):
    client.force_login(carol)
    long_reason = "x" * (MAX_TEXT_LENGTH + 1)
    response = client.post(
        EXEMPTIONS, exemption(reason=long_reason), content_type="application/json"
    )
    assert response.status_code == 400 and "reason" in response.json()
    assert not Exemption.objects.exists()


HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


@pytest.fixture
def announced(vision, h100):
    return IdleState.objects.create(
        team=vision,
        flavor=h100,
        namespace="vision",
        kind="Deployment",
        name="notebook",
        gpus=1,
        seen_at=HOUR,
        idle_since=HOUR,
        announced_at=HOUR,
        action_due_at=HOUR,
    )


def test_the_report_card_form_has_the_same_longest_and_reason_limit(client, carol, announced):
    client.force_login(carol)
    url = f"/idle/states/{announced.pk}/exempt/"
    hours = int(MAX_EXEMPTION.total_seconds() // 3600)
    for bad in (
        {"hours": str(hours + 1), "reason": "demo"},
        {"hours": "2", "reason": "x" * (MAX_TEXT_LENGTH + 1)},
        {"hours": "2", "reason": "demo \u202eon Friday"},
    ):
        page = client.post(url, bad, follow=True).content.decode()
        assert "Not exempted" in page, bad
    assert not Exemption.objects.exists()
    page = client.post(url, {"hours": str(hours), "reason": "demo"}, follow=True).content.decode()
    assert f"is exempt for {hours} hour(s)" in page


def test_the_admin_cannot_add_an_exemption_around_the_action(admin_client_root):
    assert admin_client_root.get("/admin/idle/exemption/add/").status_code == 403


# --- a team's monthly budget ---


@pytest.fixture
def admin_client_root(db):
    client = Client(raise_request_exception=False)
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize(
    ("amount", "says"),
    [("0", "greater than or equal to 0.01"), ("-5", "greater than or equal to 0.01")],
)
def test_every_door_refuses_the_same_budgets(
    client, carol, vision, admin_client_root, amount, says
):
    client.force_login(carol)
    page = client.post(
        "/billing/teams/vision/budget/", {"monthly_amount": amount}, follow=True
    ).content.decode()
    assert says in page
    response = client.post(
        "/api/v1/billing/budgets/",
        {"team": "vision", "monthly_amount": amount},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert says in response.json()["monthly_amount"][0]
    response = admin_client_root.post(
        "/admin/billing/budget/add/", {"team": vision.pk, "monthly_amount": amount, "mode": "soft"}
    )
    assert response.status_code == 200 and says in response.content.decode()
    assert not Budget.objects.exists()


def test_the_action_refuses_what_the_doors_refuse(admin_user, vision):
    from django.core.exceptions import ValidationError

    for amount in ("0", "-1", "1000000000000"):
        with pytest.raises(ValidationError) as refused:
            billing_actions.set_budget(vision, Decimal(amount), by=admin_user)
        assert "monthly_amount" in refused.value.message_dict


def test_the_admin_sets_and_removes_a_budget_through_the_action(admin_client_root, vision):
    response = admin_client_root.post(
        "/admin/billing/budget/add/",
        {
            "team": vision.pk,
            "monthly_amount": "1500",
            "mode": "hard",
            "when_spent": "stop_running",
        },
    )
    assert response.status_code == 302, response.content.decode()
    budget = Budget.objects.get(team=vision)
    assert (budget.monthly_amount, budget.mode) == (Decimal("1500.00"), "hard")
    event = AuditEvent.objects.get(action="budget_set")
    assert event.actor.username == "root" and "-> 1500.00 USD a month (hard)" in event.reason
    response = admin_client_root.post(
        f"/admin/billing/budget/{budget.pk}/change/",
        {"monthly_amount": "2000", "mode": "soft", "when_spent": "stop_running"},
    )
    assert response.status_code == 302, response.content.decode()
    assert Budget.objects.get(team=vision).monthly_amount == Decimal("2000.00")
    assert AuditEvent.objects.filter(action="budget_set").count() == 2
    response = admin_client_root.post(f"/admin/billing/budget/{budget.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Budget.objects.exists()
    assert AuditEvent.objects.filter(action="budget_remove").count() == 1
