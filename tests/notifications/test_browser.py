"""The manager's webhook form in headless Chromium: a refused URL, the secret shown
once, a test notification that a real receiver verifies with that secret, and the
pages at phone width and under axe."""

import pytest
from django.db import connections

from notifications.models import Delivery
from tests.notifications.conftest import verify
from tests.provisioning.conftest import eager  # noqa: F401 (fixture)
from tests.waiting import wait_for
from tests.web.test_browser_daily import serious_violations
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser


def test_a_manager_sets_the_webhook_and_the_test_notice_verifies(
    transactional_db,
    page,  # noqa: F811
    carol,
    vision,
    receiver,
    eager,  # noqa: F811
):
    log_in(page, "carol")
    page.goto("/teams/vision/")
    page.click("text=notification webhook")
    page.fill("#id_url", "https://10.0.0.7/hook")
    page.click("button:has-text('Save webhook')")
    page.wait_for_selector("#errors-url >> text=10.0.0.7 is a private address")
    page.fill("#id_url", receiver.url)
    page.click("button:has-text('Save webhook')")
    secret = page.locator("#secret-value").inner_text()
    assert secret.startswith("whsec_")
    shot(page, "webhook_secret_once")
    page.click("button:has-text('Send a test notification')")
    page.wait_for_selector("text=Test notification queued")
    (sent,) = wait_for(receiver.requests)
    assert verify(secret, sent.headers, sent.body)
    # Shown once: the page now holds only a hint of it, and the delivery.
    page.goto("/teams/vision/webhook/")
    assert secret not in page.content()
    row = page.locator(f"#delivery-{Delivery.objects.get().pk}").inner_text()
    assert "webhook_test" in row and "Delivered" in row and "HTTP 200" in row


def test_the_webhook_pages_hold_up_at_phone_width_and_under_axe(
    transactional_db,
    eager,  # noqa: F811
    browser,  # noqa: F811
    live_server,
    carol,
    admin_user,
    vision,
    receiver,
):
    from notifications import actions

    long_url = receiver.url + "&" + "x" * 1500
    actions.set_webhook(vision, long_url, by=carol)
    actions.set_webhook(None, long_url, by=admin_user)
    receiver.answer(410)  # a failed row in the log (tasks run inline)
    actions.send_test(vision, by=carol)
    actions.send_test(None, by=admin_user)
    assert sorted(Delivery.objects.values_list("status", flat=True)) == ["delivered", "failed"]
    problems = {}
    try:
        for user, path in (("carol", "/teams/vision/webhook/"), ("admin", "/webhooks/")):
            context = browser.new_context(
                base_url=live_server.url, viewport={"width": 390, "height": 844}, bypass_csp=True
            )
            phone = context.new_page()
            phone.set_default_timeout(10_000)
            log_in(phone, user)
            phone.goto(path)
            # Each delivery's body open: one long line of JSON, which must wrap.
            phone.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            width = phone.evaluate("document.documentElement.scrollWidth")
            found = serious_violations(phone)
            if width > 390 or found:
                problems[path] = (width, found)
            shot(phone, f"phone_webhook_{user}")
            context.close()
    finally:
        connections.close_all()
    assert problems == {}
