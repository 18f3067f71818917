"""The showback pages in headless Chromium: charts drawn, labelled, with a
pattern per series (readable without colour); screenshots in /tmp/shots/."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine

from billing import actions
from tests.billing.ledger import meter, workload
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


@pytest.fixture
def month_of_usage(vision, nlp, h100, a100, carol, admin_user):
    with time_machine.travel(NOW):  # November's budget, set while it runs
        actions.set_budget(vision, Decimal("2000"), by=carol)
    for day in range(1, 20):
        for hour in (9, 14):
            at = datetime(2026, 11, day, hour, tzinfo=UTC)
            idle = 3600 * (day % 4)
            meter(
                at,
                teams={
                    (vision, h100): (4 * 3600, 4 * 3600 - idle, idle, 0),
                    (vision, a100): (2 * 3600, 3600, 1800, 1800),
                    (nlp, h100): (3600, 3600, 0, 0),
                },
                workloads={
                    (vision, "vision", "Job", "train", h100): workload(
                        4 * 3600, 4 * 3600 - idle, idle, gpus=4, mean=0.2 + day / 40
                    ),
                    (vision, "vision", "Pod", "notebook", a100): workload(
                        2 * 3600, 3600, 1800, 1800, gpus=2, mean=0.05, fb_peak=9000
                    ),
                },
                capacity={h100.pk: 16 * 3600, a100.pk: 16 * 3600},
            )


def test_team_and_admin_pages_draw_their_charts(
    transactional_db,
    page,  # noqa: F811
    alice,
    admin_user,
    month_of_usage,
):
    with time_machine.travel(NOW, tick=False):
        log_in(page, "alice")
        page.goto("/billing/teams/vision/?month=2026-11")
        chart = page.locator("#daily-chart > svg")
        assert chart.get_attribute("role") == "img"
        legend = page.locator("#daily-chart figcaption").inner_text()
        for label in ("Active", "Idle", "Unmetered", "Reserved but unallocated"):
            assert label in legend
        # Each series is drawn with its own pattern, not colour alone.
        fills = set(
            chart.locator("rect[fill^='url']").evaluate_all(
                "r => r.map(e => e.getAttribute('fill'))"
            )
        )
        assert {f"url(#daily-chart-{p})" for p in ("solid", "hatch", "dots")} <= fills
        assert page.locator("#burn-chart polyline").count() == 3  # spent, forecast, budget
        assert "Job train" in page.locator("#utilisation").inner_text()
        shot(page, "billing_team")

        page.click("#top-idle a:has-text('Pod notebook')")
        page.wait_for_selector("h1:has-text('Report card')")
        shot(page, "billing_report_card")

        page.click("button:has-text('Log out')")
        log_in(page, "admin")
        page.goto("/billing/admin/?month=2026-11")
        assert page.locator("#teams tbody tr").count() == 2
        assert page.locator("#flavor-utilisation figure > svg").count() == 2
        shot(page, "billing_admin")


def test_one_metered_day_draws_a_narrow_bar_at_its_date(
    transactional_db,
    page,  # noqa: F811
    alice,
    vision,
    h100,
):
    """The first day of metering: one day's bar, a day wide, over its date, at a
    phone's width and a laptop's, light and dark."""
    meter(
        datetime(2026, 11, 30, 9, tzinfo=UTC),
        teams={(vision, h100): (4 * 3600, 3 * 3600, 3600, 0)},
        workloads={
            (vision, "vision", "Job", "train", h100): workload(4 * 3600, 3 * 3600, 3600, gpus=4)
        },
    )
    with time_machine.travel(datetime(2026, 11, 30, 12, tzinfo=UTC), tick=False):
        log_in(page, "alice")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for width, height in ((390, 844), (1440, 900)):
                page.set_viewport_size({"width": width, "height": height})
                page.goto("/billing/teams/vision/?month=2026-11")
                chart = page.locator("#daily-chart > svg")
                plot = chart.bounding_box()
                bars = [r.bounding_box() for r in chart.locator("rect[data-tip]").all()]
                assert len(bars) == 2  # active and idle, stacked
                for bar in bars:
                    # A thirtieth of the plot at most, in the month's last slot.
                    assert bar["width"] <= plot["width"] / 30
                    assert bar["x"] > plot["x"] + plot["width"] * 0.9
                # On a phone the chart scrolls sideways and opens on its latest bar.
                figure = page.locator("#daily-chart").bounding_box()
                assert all(bar["x"] + bar["width"] <= figure["x"] + figure["width"] for bar in bars)
                ticks = chart.locator("text[text-anchor='end']").evaluate_all(
                    "texts => texts.map(t => t.textContent)"
                )
                assert ticks[:6] == ["0", "1", "2", "3", "4", "5"]  # 4 GPU-hours, axis to 5
                labels = chart.locator("text[text-anchor='middle']").evaluate_all(
                    "texts => texts.map(t => t.textContent)"
                )
                assert labels[0] == "1 Nov" and "28 Nov" in labels
                assert "Day of November 2026 (UTC)" in chart.text_content()
                page.locator("#daily-chart").scroll_into_view_if_needed()
                page.locator("#daily-chart").screenshot(
                    path=f"/tmp/shots/daily_one_day_{width}_{scheme}.png"
                )
