"""The five ways a team's money disagreed across the pages, each as a new user
would find it (tests/billing/lost_month.py: a month with a spot reclaim and
an XID failure)."""

import csv
import io
from decimal import Decimal

import pytest

from tests.billing.lost_month import lost_month, prometheus_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.prometheus
NOVEMBER = {"month": "2026-11"}


def team_page(client):
    return client.get("/billing/teams/vision/", NOVEMBER).context["report"]


def test_idle_cost_leaves_out_the_idle_time_it_credits(lost_month, client, alice):  # noqa: F811
    """sweep-idle's two idle L4-hours (1.00 at the spot price) are credited with
    the rest of its run: the idle cost is the notebook's hour (4.00) alone."""
    client.force_login(alice)
    totals = team_page(client)["totals"]
    assert totals["credit"] == Decimal("5.50")  # 1 H100-hour at 4.00, 3 L4-hours at 0.50
    assert totals["idle_cost"] == Decimal("4.00")
    assert totals["idle_gpu_hours"] == Decimal(1)


def test_the_report_cards_add_up_to_the_spend(lost_month, client, alice):  # noqa: F811
    client.force_login(alice)
    report = team_page(client)
    cards = [
        client.get(
            f"/billing/teams/vision/workloads/{w['namespace']}/{w['kind']}/{w['name']}/"
        ).context["card"]
        for w in report["workloads"]
    ]
    assert len(cards) == 3
    assert sum(card["cost"] for card in cards) == report["totals"]["cost"]


def test_no_day_of_the_series_is_below_zero(lost_month, client, alice):  # noqa: F811
    """The reclaimed run's credit lands on the hours it ran, not all on 4 Nov."""
    client.force_login(alice)
    days = team_page(client)["daily"]
    assert [day["cost"] >= 0 for day in days] == [True, True]
    export = client.get("/billing/teams/vision/", {**NOVEMBER, "export": "days"})
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    assert all(Decimal(row["cost"]) >= 0 for row in rows)


def test_a_credited_workloads_card_does_not_say_it_was_paid_for(lost_month, client, alice):  # noqa: F811
    client.force_login(alice)
    page = client.get("/billing/teams/vision/workloads/vision/Job/sweep-idle/").content.decode()
    assert "paid for GPUs doing nothing" not in page
    assert "credited" in page


def test_a_period_the_api_does_not_know_is_a_400_naming_it(lost_month, client, alice):  # noqa: F811
    client.force_login(alice)
    response = client.get("/api/v1/billing/usage/", {"team": "vision", "period": "2026-11"})
    assert response.status_code == 400
    assert "period" in response.json()


def test_the_strips_draw_credited_idle_time_as_credited(lost_month, client, alice):  # noqa: F811
    """sweep-idle idled from 22:30 to 00:30 and was credited: its hours are the
    credited band, on the team page's month and on its card's whole run."""
    client.force_login(alice)
    picture = team_page(client)["picture"]
    (row,) = [row for row in picture.rows if row.name == "sweep-idle"]
    card = client.get("/billing/teams/vision/workloads/vision/Job/sweep-idle/")
    (whole_run,) = card.context["card"]["run"].rows
    for runs in (row.runs, whole_run.runs):
        assert [run["band"] for run in runs] == ["credited", "full"]
        assert "idle credited back" in runs[0]["title"] and runs[0]["idle"] == 0
    page = card.content.decode()
    assert "Idle, credited back (lost to a spot reclaim or an XID)" in page
