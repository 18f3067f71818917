"""The idle dashboard in headless Chromium, at 390 and 1440 px, light and
dark: exact values on hover and on keyboard focus, the table without the
picture, nothing wider than the screen; screenshots in /tmp/shots/."""

from datetime import UTC, datetime

import pytest
import time_machine

from tests.billing.idle_month import vision_month
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def _fits(tab):
    return tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_team_sees_who_pays_for_idle_gpus(
    transactional_db,
    page,  # noqa: F811
    alice,
    vision,
    nlp,
    h100,
    a100,
):
    vision_month(vision, nlp, h100, a100)
    with time_machine.travel(NOW, tick=False):
        log_in(page, "alice")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                page.set_viewport_size({"width": width, "height": height})
                page.goto("/billing/teams/vision/?month=2026-11")
                assert _fits(page), f"the page scrolls sideways at {width} px"
                shot(page, f"idle_team_{size}_{scheme}")
                if (size, scheme) == ("laptop", "light"):  # the README's picture
                    page.locator("#utilisation").screenshot(path="/tmp/shots/idle_dashboard.png")
        labels = page.locator("#idle-picture .heat-label a").all_inner_texts()
        assert labels == ["Pod notebook", "18 jobs sweep-0 … sweep-17", "Job train"]

        # Focus the notebook's strip: its first spell's exact figures appear.
        strip = page.locator("#idle-picture svg.heat-strip").first
        strip.focus()
        tip = page.locator(".chart-tip")
        assert tip.inner_text() == (
            "Pod notebook, 01 Nov 09:00–01 Nov 10:00: 2 GPUs, 40 % active, 0 of 2 GPU-hours idle"
        )
        page.keyboard.press("ArrowRight")
        assert "01 Nov 10:00–01 Nov 17:00: 2 GPUs, 1 % active, 14 of 14 GPU-hours idle" in (
            tip.inner_text()
        )
        # Hovering a bar of the daily chart says its value.
        page.locator("#daily-chart rect[data-tip]").first.hover()
        assert "GPU-hours" in tip.inner_text()
        # The picture as a table, for whoever cannot see it.
        page.click("#idle-picture summary")
        assert page.locator("#idle-picture table tbody tr").count() > 10

        # Text and lines of the charts take the page's colours in dark mode.
        fill = page.locator("#daily-chart svg text").first.evaluate("e => getComputedStyle(e).fill")
        assert fill == "rgb(230, 232, 235)"

        page.click("#idle-picture .heat-label a:has-text('Pod notebook')")
        page.wait_for_selector("h1:has-text('Report card')")


def test_the_page_works_without_javascript(
    transactional_db,
    browser,  # noqa: F811
    live_server,
    alice,
    vision,
    nlp,
    h100,
    a100,
):
    vision_month(vision, nlp, h100, a100)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    tab = context.new_page()
    with time_machine.travel(NOW, tick=False):
        tab.goto("/accounts/login/")
        tab.fill("#id_username", "alice")
        tab.fill("#id_password", "demo")
        tab.click("button:has-text('Log in')")
        tab.goto("/billing/teams/vision/?month=2026-11")
        tab.click("#idle-picture summary")
        assert "idle, 1.0 %" in tab.locator("#idle-picture table").inner_text()
        # Each run keeps its title: the browser's own tooltip.
        titles = tab.locator("#idle-picture svg.heat-strip rect title").all_text_contents()
        assert titles[0].startswith("01 Nov 09:00–01 Nov 10:00")
    context.close()


def test_the_admin_sees_every_team_and_a_report_card_its_whole_run(
    transactional_db,
    page,  # noqa: F811
    admin_user,
    alice,
    vision,
    nlp,
    h100,
    a100,
):
    vision_month(vision, nlp, h100, a100)
    with time_machine.travel(NOW, tick=False):
        log_in(page, "admin")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                page.set_viewport_size({"width": width, "height": height})
                page.goto("/billing/admin/?month=2026-11")
                assert _fits(page), f"the admin page scrolls sideways at {width} px"
                shot(page, f"idle_admin_{size}_{scheme}")
                page.goto("/billing/teams/vision/workloads/vision/Pod/notebook/")
                assert _fits(page), f"the report card scrolls sideways at {width} px"
                shot(page, f"idle_card_{size}_{scheme}")
        page.goto("/billing/admin/?month=2026-11")
        # The trend's points say their values on focus.
        page.locator("#teams svg.spark").first.focus()
        assert page.locator(".chart-tip").inner_text() == "Vision, 01 Nov: 35.00 USD idle"
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        assert page.locator(".chart-tip").inner_text() == "Vision, 03 Nov: 251.00 USD idle"
