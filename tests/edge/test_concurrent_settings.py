"""A team's setting saved for the first time by two requests at once gives one
row and no server error; a one-shot action taken twice at once is done once.

A first save locked no row (there was none to lock yet), so both requests
INSERTed and the unique constraint turned the second into an IntegrityError,
a 500. Only PostgreSQL shows this; each thread has its own connection and a
barrier starts them together.
"""

from decimal import Decimal

import pytest

from billing import actions as billing_actions
from billing.models import Budget
from idle import actions as idle_actions
from idle.models import IdlePolicy
from notifications import actions as notification_actions
from notifications.models import Webhook
from teams.errors import IllegalTransition
from teams.models import AuditEvent
from tests.api.test_concurrent_approval import run_together
from tests.factories import FlavorFactory, TeamFactory, UserFactory, add_member, make_reviewer

pytestmark = pytest.mark.postgres


@pytest.fixture
def people(transactional_db, settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    team = TeamFactory(slug="vision", name="Vision")
    carol = add_member(team, UserFactory(username="carol"), role="manager")
    dave = add_member(team, UserFactory(username="dave"), role="manager")
    flavor = FlavorFactory(slug="h100", name="H100 80GB", capacity=16)
    return team, [carol, dave], make_reviewer("admin"), flavor


def no_errors(results):
    assert not any(isinstance(r, Exception) for r in results), results


@pytest.mark.parametrize("for_team", [True, False], ids=["team", "admins"])
def test_two_first_webhook_saves_give_one_hook(people, for_team):
    team, managers, admin, _ = people
    by = managers if for_team else [admin, admin]

    def work(i):
        return notification_actions.set_webhook(
            team if for_team else None, f"http://127.0.0.1:9/hook-{i}", by=by[i]
        )

    results = run_together(work, 2)
    no_errors(results)
    (hook,) = Webhook.objects.filter(team=team if for_team else None)
    # One was created (its secret shown once), the other changed it.
    assert sorted(secret is None for _, secret in results) == [False, True]
    assert hook.url in ("http://127.0.0.1:9/hook-0", "http://127.0.0.1:9/hook-1")


@pytest.mark.parametrize("for_team", [True, False], ids=["team", "admins"])
def test_two_first_idle_policy_saves_give_one_policy(people, for_team):
    team, managers, admin, flavor = people
    by = managers if for_team else [admin, admin]

    def work(i):
        return idle_actions.set_policy(
            flavor,
            team if for_team else None,
            by=by[i],
            idle_minutes=30 + i,
            grace_minutes=5,
            mode="report",
        )

    no_errors(run_together(work, 2))
    (policy,) = IdlePolicy.objects.filter(flavor=flavor, team=team if for_team else None)
    assert policy.idle_minutes in (30, 31)


def test_two_first_budget_saves_give_one_budget(people):
    team, managers, _, _ = people

    def work(i):
        return billing_actions.set_budget(team, Decimal(100 + i), by=managers[i])

    no_errors(run_together(work, 2))
    assert Budget.objects.filter(team=team).count() == 1


def test_a_policy_removed_twice_at_once_is_removed_once(people):
    team, managers, admin, flavor = people
    policy = idle_actions.set_policy(
        flavor, None, by=admin, idle_minutes=30, grace_minutes=5, mode="report"
    )
    before = AuditEvent.objects.count()

    def work(i):
        return idle_actions.remove_policy(policy, by=admin)

    results = run_together(work, 2)
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], IllegalTransition), results
    assert "already removed" in str(refused[0])
    assert not IdlePolicy.objects.exists()
    assert AuditEvent.objects.count() == before + 1
