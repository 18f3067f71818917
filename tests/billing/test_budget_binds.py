# ruff: noqa: F811 - the batch fixtures, imported, are parameters here
"""Hard budgets that bind (issue: "Budgets that bind"): a job is checked at what it
may cost at most (its maximum runtime, the deadline the portal gives it), at
planning and again at its release; a released job reserves that bound and gives back
what it did not use when it ends; once a team's running total reaches its hard
budget, its running batch work is stopped as the budget's rule says, its owner is
told, and its namespace is capped at what runs until the month turns or the budget
is raised. The cluster side (kubectl as a member) is tests/provisioning/
test_budget_namespace.py."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from batch import actions, launch
from batch.models import BatchJob, BatchJobEvent
from billing import actions as billing_actions
from billing.models import Budget
from provisioning.desired import desired_state
from provisioning.manifests import BUDGET_QUOTA_NAME, QUOTA_NAME
from teams import hooks
from teams.models import AuditEvent
from tests.api.conftest import client_for
from tests.batch.conftest import allowlist, job_data, nightly  # noqa: F401 (fixtures)
from tests.billing.ledger import meter

URL = "/api/v1/batch-jobs/"
# Monday 1 June 2026, noon in New York; the Nights window opens at 22:00 there.
NOON = datetime(2026, 6, 1, 16, tzinfo=UTC)
OPENS = datetime(2026, 6, 2, 2, tzinfo=UTC)
Status = BatchJob.Status


@pytest.fixture
def team(allowlist, nightly, vision, alice, carol, h100):
    """Vision (alice a member, carol its manager) and the Nights window, 8 H100."""
    return vision


@pytest.fixture
def quiet(monkeypatch):
    """What commits would queue on a broker (syncs, planner runs) left out, so the
    after-commit emails of a test can run; the notices people are told, kept."""
    monkeypatch.setattr(launch.job_sync, "enqueue", lambda ids: ids)
    monkeypatch.setattr(actions, "request_plan", lambda reason: None)
    from provisioning import actions as provisioning_actions

    monkeypatch.setattr(provisioning_actions, "enqueue", lambda ids: ids)
    told = []
    monkeypatch.setattr(hooks, "notice", told.append)
    return told


def queue(alice, **overrides):
    """A job of Vision's queued at noon and planned: 2 H100 for 2 h expected and 3 h at
    most, estimated 8.00 (2 x 2 h x 4.00 x the window's 0.5), 12.00 at most."""
    with time_machine.travel(NOON, tick=False):
        body = client_for(alice).post(URL, job_data(**overrides), format="json").json()
        actions.replan(reason="test")
    return BatchJob.objects.get(pk=body["id"])


def spend(team, flavor, amount, hour):
    """`amount` (at 4.00 a GPU-hour) on the ledger for one hour: GPUs the team's own
    pods held (kubectl), not batch jobs."""
    seconds = int(Decimal(amount) / Decimal(4) * 3600)
    meter(hour, teams={(team, flavor): (seconds, seconds, 0, 0)})


def left(team, now):
    return billing_actions.budget_left([team.pk], now)[team.pk]


def hard(team, amount, by, **kwargs):
    with time_machine.travel(NOON, tick=False):
        return billing_actions.set_budget(team, Decimal(amount), by=by, mode="hard", **kwargs)


def test_a_job_is_held_at_its_maximum_runtime_not_its_expected_one(team, alice, carol):
    hard(team, "10", carol)
    job = queue(alice)
    # Its estimate (8.00) fits in the 10.00 left; what it may cost (12.00) does not.
    assert job.estimated_cost == Decimal("8.00")
    assert job.status == Status.QUEUED
    assert job.explanation.startswith(
        "Held by Vision's budget: its cost at its maximum runtime of 180 min (12.00 USD) "
        "would take the team past it (10.00 USD left this month)."
    )


def test_the_release_checks_the_bound_against_what_is_left_then(team, alice, carol, h100):
    hard(team, "20", carol)
    job = queue(alice)
    assert job.status == Status.PLANNED  # 12.00 of the 20.00 left at noon
    spend(team, h100, "10", NOON - timedelta(hours=2))  # metered since

    assert launch.release_due(OPENS) == []
    job.refresh_from_db()
    assert job.status == Status.QUEUED
    assert job.released_at is None and job.window_id is None
    assert job.explanation.startswith(
        "Held at its release by Vision's budget: its cost for its whole deadline "
        "(12.00 USD) would take the team past it (10.00 USD left this month)."
    )
    assert job.events.last().action == BatchJobEvent.Action.UNPLAN


def test_a_released_job_reserves_its_bound_and_gives_back_what_it_did_not_use(
    team, alice, carol, quiet
):
    hard(team, "30", carol)
    job = queue(alice)
    assert launch.release_due(OPENS) == [job.pk]
    job.refresh_from_db()
    assert job.reserved_cost == Decimal("12.00")
    with time_machine.travel(OPENS, tick=False):
        assert client_for(alice).get(f"{URL}{job.pk}/").json()["reserved_cost"] == "12.00"
    # While it runs the team has what its bound leaves, however little it used yet.
    assert left(team, OPENS + timedelta(minutes=30)) == Decimal("18.00")

    with time_machine.travel(OPENS + timedelta(minutes=30), tick=False):
        actions.cancel(job, by=alice)
    # It held its 2 GPUs for 30 min: 2.00 (at the window's 0.5); 10.00 came back.
    assert left(team, OPENS + timedelta(hours=1)) == Decimal("28.00")


def test_reaching_the_budget_stops_running_batch_work_and_tells_the_owner(
    team, alice, carol, h100, quiet, mailoutbox, django_capture_on_commit_callbacks
):
    hard(team, "20", carol)
    job = queue(alice)
    launch.release_due(OPENS)
    # Notebooks started with kubectl: 10.00 on the ledger the hour before. With the
    # running job's 12.00 the team's running total is past its budget.
    spend(team, h100, "10", OPENS - timedelta(hours=1))
    mailoutbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        done = billing_actions.enforce_budgets(OPENS + timedelta(minutes=10))
    assert done == {team.pk: "spent"}

    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert job.used_gpu_seconds == 2 * 600
    stop = job.events.last()
    assert stop.action == BatchJobEvent.Action.BUDGET_STOP
    assert stop.reason.startswith(
        "Stopped: Vision's hard budget of 20.00 USD for June 2026 is spent"
    )
    budget = Budget.objects.get(team=team)
    assert budget.spent_at == OPENS + timedelta(minutes=10)
    event = AuditEvent.objects.get(team=team, action="budget_spent")
    assert f"Stopped 1: batch job #{job.pk}" in event.reason

    # The owner (the team's manager) by email, every channel by a notice; the job's
    # submitter hears of her job as of any job that ends.
    (owner,) = [m for m in mailoutbox if m.to == ["carol@example.com"]]
    assert owner.subject == (
        "[GPU portal] Vision has spent its hard GPU budget: new GPU work is held"
    )
    assert f"batch job #{job.pk}" in owner.body and "/teams/vision/" in owner.body
    assert [m.subject for m in mailoutbox if m.to == ["alice@example.com"]] == [
        f"[GPU portal] Batch job #{job.pk} train-resnet cancelled"
    ]
    (notice,) = quiet
    assert notice.event == "budget_spent" and notice.team_id == team.pk
    assert notice.data["stopped"] == [f"batch job #{job.pk} “train-resnet” (2 x H100 80GB)"]

    # Held for the month, whatever the stop gave back: nothing new is released.
    assert left(team, OPENS + timedelta(minutes=20)) == 0
    assert billing_actions.enforce_budgets(OPENS + timedelta(minutes=20)) == {}


def test_the_hold_new_rule_lets_running_jobs_finish(team, alice, carol, h100, quiet):
    hard(team, "20", carol, when_spent=Budget.WhenSpent.HOLD_NEW)
    job = queue(alice)
    launch.release_due(OPENS)
    spend(team, h100, "10", OPENS - timedelta(hours=1))

    assert billing_actions.enforce_budgets(OPENS + timedelta(minutes=10)) == {team.pk: "spent"}
    job.refresh_from_db()
    assert job.status == Status.RELEASED
    # The namespace is capped at what runs: the job's 2 GPUs.
    (cap,) = [o for o in desired_state(team.pk).objects() if o["kind"] == "ResourceQuota"
              and o["metadata"]["name"] == BUDGET_QUOTA_NAME]  # fmt: skip
    assert cap["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}


def quotas(team):
    return {
        obj["metadata"]["name"]: obj["spec"]["hard"]
        for obj in desired_state(team.pk).objects()
        if obj["kind"] == "ResourceQuota"
    }


def test_a_spent_budget_caps_the_namespace_until_raised_or_the_month_turns(
    team, carol, admin_user, h100, quiet
):
    hard(team, "20", carol)
    spend(team, h100, "24", NOON - timedelta(hours=2))
    assert quotas(team) == {QUOTA_NAME: {"requests.nvidia.com/gpu": "0"}}

    assert billing_actions.enforce_budgets(NOON) == {team.pk: "spent"}
    # gpu-quota stays as approved; the budget's quota holds the namespace to what runs.
    assert quotas(team) == {
        QUOTA_NAME: {"requests.nvidia.com/gpu": "0"},
        BUDGET_QUOTA_NAME: {"requests.nvidia.com/gpu": "0"},
    }

    # A platform admin raises it above what is spent: the hold lifts at once.
    with time_machine.travel(NOON, tick=False):
        billing_actions.set_budget(team, Decimal("50"), by=admin_user, mode="hard")
    assert Budget.objects.get(team=team).spent_at is None
    assert BUDGET_QUOTA_NAME not in quotas(team)
    lifted = AuditEvent.objects.get(team=team, action="budget_lifted")
    assert lifted.actor == admin_user
    assert lifted.reason == (
        "GPU work of Vision is no longer held: the budget was raised above the team's "
        "running total."
    )

    # Lowered again, spent again; the month's turn lets it go by itself.
    hard(team, "20", carol)
    assert BUDGET_QUOTA_NAME in quotas(team)
    july = datetime(2026, 7, 1, 0, 5, tzinfo=UTC)
    assert billing_actions.enforce_budgets(july) == {team.pk: "lifted"}
    assert BUDGET_QUOTA_NAME not in quotas(team)


def test_the_team_page_says_why_the_work_is_held(client, team, alice, carol, h100, quiet):
    hard(team, "20", carol)
    spend(team, h100, "24", NOON - timedelta(hours=2))
    client.force_login(alice)
    assert 'id="budget-held"' not in client.get("/teams/vision/").content.decode()

    with time_machine.travel(NOON + timedelta(minutes=1), tick=False):
        billing_actions.enforce_budgets()
        page = client.get("/teams/vision/").content.decode()
    held = page[page.index('id="budget-held"') :].split("</section>")[0]
    assert "has reached its hard GPU budget of 20.00 USD" in held
    assert "24.00 USD spent" in held
    assert "exceeded quota: gpu-budget-spent" in held
    assert "the team's running batch jobs were stopped" in held
    assert "when the month turns (1 July 2026)" in held


def test_raising_it_in_the_django_admin_lifts_the_hold(
    client, team, carol, admin_user, h100, quiet
):
    hard(team, "20", carol)
    spend(team, h100, "24", NOON - timedelta(hours=2))
    billing_actions.enforce_budgets(NOON)
    budget = Budget.objects.get(team=team)
    assert budget.spent_at is not None

    admin_user.is_superuser = True  # the Django admin's own permissions
    admin_user.save()
    client.force_login(admin_user)
    form = {"team": team.pk, "monthly_amount": "50", "mode": "hard", "when_spent": "stop_running"}
    with time_machine.travel(NOON, tick=False):
        response = client.post(f"/admin/billing/budget/{budget.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    budget.refresh_from_db()
    assert (budget.monthly_amount, budget.spent_at) == (Decimal("50.00"), None)
    assert BUDGET_QUOTA_NAME not in quotas(team)
    # Audited as any change of a budget, by whom.
    assert AuditEvent.objects.filter(team=team, action="budget_lifted", actor=admin_user).exists()
    assert AuditEvent.objects.filter(team=team, action="budget_set", actor=admin_user).exists()
