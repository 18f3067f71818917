"""Budgets that hold batch work (issue 20): a team's hard budget holds the jobs
whose estimates would take it past what is left this month; an admin releases one."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from batch import actions
from batch.models import BatchJob
from billing import actions as billing_actions
from tests.api.conftest import client_for
from tests.batch.conftest import job_data
from tests.billing.ledger import meter

URL = "/api/v1/batch-jobs/"
# Monday 1 June 2026, noon in New York; the Nights window opens at 22:00.
NOON = datetime(2026, 6, 1, 16, tzinfo=UTC)


@pytest.fixture
def queued(allowlist, nightly, alice, carol, h100):
    """Vision's hard budget of 20 with 16 spent this month (4 GPU-hours of H100 at
    4.00 on the ledger), and two of its jobs, each estimated at 8.00 (2 GPUs x 2 h x
    4.00 x the window's 0.5) and costing at most 12.00 (its maximum runtime, 3 h):
    the first is past what is left, the second too."""
    vision = alice.memberships.get().team
    meter(NOON - timedelta(hours=3), teams={(vision, h100): (4 * 3600, 4 * 3600, 0, 0)})
    billing_actions.set_budget(vision, Decimal("20"), by=carol, mode="hard")
    with time_machine.travel(NOON, tick=False):
        first = client_for(alice).post(URL, job_data(name="first"), format="json").json()
        second = client_for(alice).post(URL, job_data(name="second"), format="json").json()
        actions.replan(reason="test")
        yield {"first": first["id"], "second": second["id"], "team": vision}


def detail(user, job_id):
    with time_machine.travel(NOON, tick=False):
        return client_for(user).get(f"{URL}{job_id}/").json()


def test_a_hard_budget_holds_the_jobs_past_it_with_the_reason(queued, alice):
    for key in ("first", "second"):
        body = detail(alice, queued[key])
        assert body["status"] == "queued"
        assert body["waiting_reason"]["code"] == "held_by_budget"
        assert body["eta"] is None
        assert body["explanation"].startswith(
            "Held by Vision's budget: its cost at its maximum runtime of 180 min (12.00 USD) "
            "would take the team past it (4.00 USD left this month)."
        )


def test_a_smaller_job_after_a_held_one_still_fits(queued, alice):
    with time_machine.travel(NOON, tick=False):
        # 1 GPU for 1 h: 2.00, within the 4.00 left.
        small = client_for(alice).post(
            URL,
            job_data(name="small", gpus=1, expected_runtime_minutes=60, max_runtime_minutes=60),
            format="json",
        )
        actions.replan(reason="test")
    assert detail(alice, small.json()["id"])["status"] == "planned"


def test_an_admin_releases_one_job_past_the_budget_and_it_is_audited(queued, alice, admin_user):
    with time_machine.travel(NOON, tick=False):
        response = client_for(admin_user).post(
            f"{URL}{queued['first']}/release-past-budget/",
            {"reason": "Paper deadline on Friday"},
            format="json",
        )
        assert response.status_code == 200, response.content
        again = client_for(admin_user).post(f"{URL}{queued['first']}/release-past-budget/")
        assert again.status_code == 409
        actions.replan(reason="test")
    released = detail(alice, queued["first"])
    assert released["status"] == "planned"
    event = [e for e in released["events"] if e["action"] == "budget_release"]
    assert [(e["actor"], e["reason"]) for e in event] == [("admin", "Paper deadline on Friday")]
    # The released job counts against the budget: the second is still held.
    second = detail(alice, queued["second"])
    assert second["waiting_reason"]["code"] == "held_by_budget"
    assert (
        "(4.00 USD left this month; the team's jobs ahead of it take 12.00 USD)"
        in (second["explanation"])
    )


def test_members_and_managers_cannot_release_past_the_budget(queued, alice, carol):
    for user in (alice, carol):
        response = client_for(user).post(f"{URL}{queued['first']}/release-past-budget/")
        assert response.status_code == 403
    assert not BatchJob.objects.get(pk=queued["first"]).budget_override


def test_a_soft_budget_holds_nothing(queued, alice, carol):
    billing_actions.set_budget(queued["team"], Decimal("20"), by=carol, mode="soft")
    with time_machine.travel(NOON, tick=False):
        actions.replan(reason="test")
    assert detail(alice, queued["first"])["status"] == "planned"
    assert detail(alice, queued["second"])["status"] == "planned"


def test_the_job_page_shows_the_hold_and_the_admins_release_button(
    client, queued, alice, admin_user
):
    client.force_login(alice)
    with time_machine.travel(NOON, tick=False):
        page = client.get(f"/batch/jobs/{queued['first']}/").content.decode()
    assert "Held by Vision&#x27;s budget" in page
    assert "Release past the budget" not in page
    client.force_login(admin_user)
    with time_machine.travel(NOON, tick=False):
        page = client.get(f"/batch/jobs/{queued['first']}/").content.decode()
        assert "Release past the budget" in page
        response = client.post(
            f"/batch/jobs/{queued['first']}/release-past-budget/", {"reason": "ok"}, follow=True
        )
    assert "may run past its team&#x27;s budget" in response.content.decode()
    assert BatchJob.objects.get(pk=queued["first"]).budget_override
