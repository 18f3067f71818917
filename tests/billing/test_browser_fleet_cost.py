"""Where the GPU money went, in headless Chromium: reached from the admin's spend
page, its chart drawn with a pattern per part, readable light and dark, on a
390 px phone without sideways scroll, without JavaScript too, and a team's name
leads to its page. Screenshots in /tmp/shots/."""

import pytest
from django.db import connections

from tests.billing.test_fleet_cost import november  # noqa: F401 (a fixture)
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401
from tests.web.test_browser_pages import overflowing_tables

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def test_the_admin_sees_where_the_money_went_and_drills_down(
    transactional_db,
    page,  # noqa: F811
    admin_user,
    november,  # noqa: F811
):
    log_in(page, "admin")
    page.goto("/billing/admin/?month=2026-11")
    page.click("#fleet-link")
    page.wait_for_selector("h1:has-text('Where the GPU money went')")
    assert page.locator("#fleet-cost").inner_text() == "208.00 USD"
    chart = page.locator("#fleet-chart > svg")
    assert chart.get_attribute("role") == "img"
    legend = page.locator("#fleet-chart figcaption").inner_text()
    for label in ("used", "idle", "Outside any team", "Unreserved"):
        assert label in legend
    fills = set(
        chart.locator("rect[fill^='url']").evaluate_all("r => r.map(e => e.getAttribute('fill'))")
    )
    assert fills == {f"url(#fleet-chart-{p})" for p in ("solid", "hatch", "dots", "cross")}
    ink = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert fits, (scheme, size)
            assert all(table["hinted"] for table in overflowing_tables(page)), (scheme, size)
            shot(page, f"billing_fleet_{size}_{scheme}")
        # The chart's labels take the page's text colour, and it differs from the background.
        ink[scheme] = page.evaluate(
            """() => [getComputedStyle(document.querySelector('#fleet-chart svg text')).fill,
                      getComputedStyle(document.body).backgroundColor]"""
        )
        assert ink[scheme][0] != ink[scheme][1]
    assert ink["light"] != ink["dark"]
    page.emulate_media(color_scheme="light")
    page.click("#by-team a:has-text('Vision')")
    page.wait_for_selector("h1:has-text('Vision')")
    assert page.url.endswith("/billing/teams/vision/?month=2026-11")


def test_the_page_reads_without_javascript(
    transactional_db,
    browser,  # noqa: F811
    live_server,
    admin_user,
    november,  # noqa: F811
):
    context = browser.new_context(
        base_url=live_server.url, java_script_enabled=False, viewport={"width": 390, "height": 844}
    )
    try:
        tab = context.new_page()
        tab.goto("/accounts/login/")
        tab.fill("#id_username", "admin")
        tab.fill("#id_password", "demo")
        tab.click("button:has-text('Log in')")
        tab.goto("/billing/fleet/?month=2026-11")
        assert tab.locator("#fleet-chart > svg rect[fill^='url']").count() == 4  # November's parts
        assert "153.44 USD" in tab.locator("#fleet-parts").inner_text()
        tab.click("#fleet-chart summary")  # the figures as a table: a <details>, no script
        table = tab.locator("#fleet-chart table").inner_text().lower()
        assert "nov 2026\t21.11 usd\t28.89 usd\t4.56 usd\t153.44 usd" in table
        shot(tab, "billing_fleet_phone_no_js")
    finally:
        context.close()
        connections.close_all()
