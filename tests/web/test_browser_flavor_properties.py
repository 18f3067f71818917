"""Alice asks for "at least 40 GB, any model" in headless Chromium: the flavor list
narrows as she types, each match shows its cost and what is free, and she submits
one. Screenshots (light, dark, phone) go to /tmp/shots/."""

from datetime import timedelta

import pytest
from django.db import connections

from gpu_requests.models import QuotaRequest
from tests.factories import next_week
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401
from tests.web.test_request_flavor_properties import catalog  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser


def options(tab):
    return tab.eval_on_selector_all(
        "#id_flavor option[value]:not([value=''])", "els => els.map(e => e.value)"
    )


def test_alice_narrows_the_flavors_by_memory_and_requests_one(
    transactional_db,
    page,  # noqa: F811
    browser,  # noqa: F811
    live_server,
    alice,
    vision,
    h100,
    catalog,  # noqa: F811
):
    from playwright.sync_api import expect

    log_in(page, "alice")
    page.goto("/requests/new/")
    assert page.locator("#flavor-matches tbody tr").count() == 7
    page.fill("#id_min_memory_gb", "40")
    # The live check swaps in the matches and the narrowed select.
    expect(page.locator("#flavor-matches tbody tr")).to_have_count(4)
    assert len(options(page)) == 4
    page.select_option("#id_sharing", "mig")
    page.wait_for_selector("#flavor-matches:has-text('No flavor has all these properties')")
    assert options(page) == []
    page.select_option("#id_sharing", "whole")
    page.fill("#id_model", "H100")
    expect(page.locator("#flavor-matches tbody tr")).to_have_count(1)
    assert options(page) == [str(h100.pk)]
    page.select_option("#id_flavor", str(h100.pk))
    start = next_week()
    page.fill("#id_gpus", "2")
    page.fill("#id_starts_at", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_ends_at", (start + timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_justification", "Fine-tune the detector")
    page.wait_for_selector("#match-h100:has-text('192.00 USD')")
    page.wait_for_selector("#match-h100:has-text('16 of 16')")
    # Typing elsewhere did not swap the select away from her choice.
    assert page.input_value("#id_flavor") == str(h100.pk)
    shot(page, "request_properties_light")
    page.click("button:has-text('Submit request')")
    page.wait_for_selector("text=submitted for review")
    assert QuotaRequest.objects.get().flavor == h100

    try:
        for name, viewport, scheme in [
            ("dark", {"width": 1280, "height": 900}, "dark"),
            ("phone", {"width": 390, "height": 844}, "light"),
            ("phone_dark", {"width": 390, "height": 844}, "dark"),
        ]:
            context = browser.new_context(
                base_url=live_server.url, viewport=viewport, color_scheme=scheme
            )
            tab = context.new_page()
            tab.set_default_timeout(10_000)
            log_in(tab, "alice")
            tab.goto("/requests/new/")
            tab.fill("#id_min_memory_gb", "40")
            expect(tab.locator("#flavor-matches tbody tr")).to_have_count(4)
            # Nothing runs off the side of a phone.
            assert tab.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            shot(tab, f"request_properties_{name}")
            context.close()
    finally:
        connections.close_all()  # see the page fixture
