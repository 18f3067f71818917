from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail

from billing import actions
from billing.models import Budget
from teams import errors
from teams.models import AuditEvent
from tests.billing.ledger import meter, workload

NOW = datetime(2026, 11, 10, 12, 30, tzinfo=UTC)
HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def usage(vision, h100):
    # 8 GPU-hours held, 2 active, 6 idle at 4.00: 32.00 spent, 24.00 idle.
    meter(
        HOUR,
        teams={(vision, h100): (8 * 3600, 2 * 3600, 6 * 3600, 0)},
        workloads={
            (vision, "vision", "Job", "notebook", h100): workload(
                8 * 3600, 2 * 3600, 6 * 3600, gpus=8, mean=0.02, fb_peak=9 * 1024
            )
        },
    )


def test_it_shows_spend_idle_and_top_idle_workloads(client, alice, usage):
    client.force_login(alice)
    response = client.get("/billing/teams/vision/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "32.00 USD" in page
    assert "24.00 USD idle" in page and "at 2 % activity" in page
    assert "Job notebook" in page
    assert 'id="daily-chart"' in page and "Idle 6 GPU-hours" in page


def test_the_forecast_extends_the_pace_so_far_to_the_months_end(client, alice, usage):
    # 32.00 in the 226 hours metered (to 10:00 on the 10th) of November's 720.
    client.force_login(alice)
    page = client.get("/billing/teams/vision/").content.decode()
    assert 'id="forecast">101.95 USD<' in page


def test_it_is_404_for_other_teams(client, bob, usage):
    client.force_login(bob)
    assert client.get("/billing/teams/vision/").status_code == 404


def test_a_bad_month_is_a_readable_404(client, alice):
    client.force_login(alice)
    response = client.get("/billing/teams/vision/?month=2026-13")
    assert response.status_code == 404


def test_it_says_when_metering_is_off(client, alice, settings):
    settings.PORTAL_PROMETHEUS_URL = ""
    client.force_login(alice)
    page = client.get("/billing/teams/vision/").content.decode()
    assert "Metering is off" in page and "apt-get install prometheus" in page


def test_query_count_is_pinned(client, alice, vision, h100, usage, django_assert_num_queries):
    client.force_login(alice)
    # 14 (one the month's own budget), one for the idle showback panel
    # (idle.showback, hooks.on_spend_panel) and one for quota nobody uses
    # (reports.unused_quota: none here, so no requests read).
    with django_assert_num_queries(16):
        client.get("/billing/teams/vision/")
    for day in range(1, 9):  # more days and workloads: the same queries
        meter(
            HOUR - timedelta(days=day),
            teams={(vision, h100): (3600, 0, 3600, 0)},
            workloads={(vision, "vision", "Job", f"j{day}", h100): workload(3600, 0, 3600)},
        )
    with django_assert_num_queries(16):
        client.get("/billing/teams/vision/")


def test_budget_emails_go_once_per_threshold_and_month(
    carol, alice, vision, h100, usage, django_capture_on_commit_callbacks
):
    actions.set_budget(vision, Decimal("60"), by=carol)  # 32 of 60: past 50 %
    with django_capture_on_commit_callbacks(execute=True):
        meter(HOUR + timedelta(hours=1), teams={(vision, h100): (3600, 3600, 0, 0)})
    assert [m.subject for m in mail.outbox] == [
        "[GPU portal] Vision has spent 50 % of its GPU budget"
    ]
    with django_capture_on_commit_callbacks(execute=True):
        meter(HOUR + timedelta(hours=2), teams={(vision, h100): (3600, 3600, 0, 0)})
    assert len(mail.outbox) == 1  # 40 of 60: still only 50 %
    # 56 of 60, then 60: 80 % and 100 % each once.
    for hour, gpus in ((3, 4), (4, 1), (5, 1)):
        with django_capture_on_commit_callbacks(execute=True):
            meter(HOUR + timedelta(hours=hour), teams={(vision, h100): (gpus * 3600, 0, 0, 0)})
    assert [m.subject.split()[-6] for m in mail.outbox] == ["50", "80", "100"]


def test_members_cannot_set_budgets(client, alice, vision):
    client.force_login(alice)
    response = client.post("/billing/teams/vision/budget/", {"monthly_amount": "100"})
    assert response.status_code == 403


def test_budget_changes_are_audited_on_the_team_page(client, carol, alice, vision):
    actions.set_budget(vision, Decimal("1500"), by=carol)
    actions.set_budget(vision, Decimal("1500"), by=carol)  # no change: no event
    actions.set_budget(vision, Decimal("2000"), by=carol)
    actions.set_budget(vision, None, by=carol)
    actions.set_budget(vision, None, by=carol)  # nothing to remove: no event
    with pytest.raises(errors.NotAllowed):
        actions.set_budget(vision, Decimal("1"), by=alice)
    events = AuditEvent.objects.filter(team=vision, action__startswith="budget")
    assert [(e.action, e.actor, e.reason) for e in events] == [
        ("budget_set", carol, "none -> 1500.00 USD a month (soft)"),
        ("budget_set", carol, "1500.00 USD a month (soft) -> 2000.00 USD a month (soft)"),
        ("budget_remove", carol, "2000.00 USD a month (soft) -> none"),
    ]
    assert not Budget.objects.filter(team=vision).exists()
    client.force_login(alice)
    page = client.get("/teams/vision/").content.decode()
    assert (
        "Budget set" in page
        and "1500.00 USD a month (soft) -&gt; 2000.00 USD a month (soft)" in page
    )
    assert "Budget removed" in page


def test_a_manager_sets_a_budget_and_bad_amounts_are_refused(client, carol, vision):
    client.force_login(carol)
    response = client.post("/billing/teams/vision/budget/", {"monthly_amount": "-5"}, follow=True)
    assert "greater than or equal to 0.01" in response.content.decode()
    response = client.post(
        "/billing/teams/vision/budget/", {"monthly_amount": "1e400"}, follow=True
    )
    assert response.status_code == 200
    response = client.post("/billing/teams/vision/budget/", {"monthly_amount": "500"}, follow=True)
    assert "500.00 USD a month" in response.content.decode()


def _daily_chart(page):
    """The daily chart's bars {x, width, title} and x-axis labels, from its SVG."""
    import re

    svg = page.split('id="daily-chart"')[1].split("</svg>")[0]
    bars = [
        {"x": float(x), "width": float(width), "title": title}
        for x, width, title in re.findall(
            r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*data-tip="([^"]*)"', svg
        )
    ]
    labels = re.findall(r'<text x="([\d.]+)" y="\d+" text-anchor="middle"[^>]*>([^<]*)</text>', svg)
    names = re.findall(r'text-anchor="end" font-size="11">([^<]*)</text>', svg)
    return bars, [(float(x), text) for x, text in labels], names


def test_one_day_of_figures_is_one_narrow_bar_at_its_date(client, alice, usage):
    """A month with a single metered day (the 10th) draws one bar of a day's
    width where the 10th is, not one bar across the whole chart labelled "10"."""
    from billing import charts

    client.force_login(alice)
    page = client.get("/billing/teams/vision/").content.decode()
    bars, labels, names = _daily_chart(page)
    # The 10th is today, metered to 10:00: its bar is told as partial.
    assert {bar["title"] for bar in bars} == {
        "10 Nov: Active 2 GPU-hours so far (10 of 24 hours metered)",
        "10 Nov: Idle 6 GPU-hours so far (10 of 24 hours metered)",
    }
    slot = (charts.WIDTH - charts.LEFT - charts.RIGHT) / 30  # November's days
    for bar in bars:
        assert bar["width"] <= slot
        # The 10th's slot is the tenth of thirty.
        assert charts.LEFT + 9 * slot <= bar["x"] < charts.LEFT + 10 * slot
    # Dates along the axis, the whole month: 1, 4, 7 ... 28 November.
    assert [text for _, text in labels] == [f"{day} Nov" for day in range(1, 31, 3)]
    assert "Day of November 2026 (UTC)" in names and "GPU-hours" in page
    # The table lists the day with figures only.
    table = page.split('id="daily-chart"')[1].split("</tbody>")[0]
    assert table.count("<tr>") == 2 and "10 Nov" in table


def test_a_bar_is_never_wider_than_a_few_days():
    from billing import charts

    chart = charts.stacked_bars([{"label": "10 Nov", "active_gpu_hours": 3}], "label")
    assert chart.bars[0]["width"] == charts.MAX_BAR_WIDTH
    assert chart.x_labels == [(chart.left + chart.plot_width / 2, "10 Nov", False, "middle")]


def test_a_line_charts_last_label_ends_at_its_edge_not_past_it():
    """The last day stands at the plot's right edge: its label ends there (a middle
    anchor drew half of it past the chart, clipped)."""
    from billing import charts

    chart = charts.line_chart(
        ["1 Dec", "2 Dec", "3 Dec"], [{"label": "x", "values": [1, 2, 3]}], "GPU-hours"
    )
    anchors = [(label, anchor) for _, label, _, anchor in chart.x_labels]
    assert anchors == [("1 Dec", "middle"), ("2 Dec", "middle"), ("3 Dec", "end")]
