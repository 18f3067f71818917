"""Alice asks for two H100s, the admin approves them in the queue, alice sees them.

Drives headless Chromium through Playwright against pytest-django's live
server, and leaves a screenshot of each main page in /tmp/shots/.
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.db import connections

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.factories import next_week, submit

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path("/tmp/shots")

pytestmark = pytest.mark.browser

# Playwright's sync API runs an event loop in this thread; Django's ORM calls
# from the test body would otherwise be refused as "async unsafe".
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    # Nothing may come from the internet: fail any request that leaves the live server.
    outside = []

    def block_outside(route):
        outside.append(route.request.url)
        route.abort()

    page.route(lambda url: not url.startswith(live_server.url), block_outside)
    # Every page must work under the Content-Security-Policy: Chromium reports
    # each refused script, style or connection on the console.
    refused = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    context.close()
    # ORM calls made while Playwright runs get a connection of their own
    # (asgiref's Local follows the greenlet's context); close it before the
    # test database is dropped.
    connections.close_all()
    assert outside == []
    assert refused == []


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def log_in(page, username):
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "demo")
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Team dashboard')")


def log_out(page):
    page.click("button:has-text('Log out')")
    page.wait_for_selector("h1:has-text('Log in')")


def test_alice_requests_admin_approves_alice_sees_it(
    transactional_db, page, alice, bob, nlp, vision, admin_user, h100, a100, eager
):
    # eager: the decision email is a task; it runs in this process as a worker would.
    # Some company in the queue and the calendar, so the pages show real shapes.
    actions.approve(submit(nlp, a100, bob, gpus=6, starts_at=next_week(days=3)), by=admin_user)
    submit(nlp, a100, bob, gpus=12, starts_at=next_week(days=3), reason="Pretrain a 7B model")
    # Overlaps alice's request below: its capacity cell must follow her approval.
    rival = submit(nlp, h100, bob, gpus=14, starts_at=next_week(hours=12), reason="Eval sweep")

    page.goto("/accounts/login/")
    shot(page, "login")
    log_in(page, "alice")

    page.click("nav >> text=New request")
    start = next_week()
    page.select_option("#id_flavor", str(h100.pk))
    page.fill("#id_gpus", "2")
    page.fill("#id_starts_at", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_ends_at", (start + timedelta(hours=48)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_justification", "Fine-tune the detector on the new camera data")
    # The live check swaps in the estimate: 2 GPUs x 48 h x 4.00.
    page.wait_for_selector("#request-feedback:has-text('384.00 USD')")
    shot(page, "request_new")
    page.click("button:has-text('Submit request')")
    page.wait_for_selector("text=submitted for review")
    req = QuotaRequest.objects.get(team=vision)
    assert page.url.endswith(f"/requests/{req.pk}/")
    shot(page, "request_detail")
    log_out(page)

    log_in(page, "admin")
    page.click("nav >> text=Review queue")
    row = page.locator(f"#req-{req.pk}")
    row.locator("input[name=reason]").fill("Enjoy")
    shot(page, "review_queue")
    # A full reload would drop this marker; an in-place swap keeps it.
    page.evaluate("window.stillHere = true")
    row.locator("button:has-text('Approve')").click()
    page.wait_for_selector(f"#req-{req.pk} .badge.status-approved")
    assert page.evaluate("window.stillHere") is True
    assert "approved." in page.locator(f"#req-{req.pk}").inner_text()
    # The same response carried the other H100 row's new capacity and the count.
    page.wait_for_selector(f"#cap-{rival.pk}:has-text('2 → 16 of 16 GPUs')")
    assert page.locator("#queue-summary").inner_text().startswith("2 pending requests")
    shot(page, "review_queue_after")
    log_out(page)

    log_in(page, "alice")
    team = page.locator("#team-vision")
    assert "H100 80GB" in team.locator("table.data").inner_text()
    assert "approved" in team.inner_text().lower()
    shot(page, "dashboard")
    assert QuotaRequest.objects.get(pk=req.pk).status == QuotaRequest.Status.APPROVED
    assert "alice@example.com" in [m.to[0] for m in mail.outbox]


def test_the_justification_is_counted_not_cut(transactional_db, page, alice, h100):
    log_in(page, "alice")
    page.click("nav >> text=New request")
    page.wait_for_selector("#count-justification:has-text('0 / 2,000')")
    page.fill("#id_justification", "Line one\nline two")  # a form sends the break as two
    page.wait_for_selector("#count-justification:has-text('18 / 2,000')")
    page.fill("#id_justification", "x" * 2001)
    page.wait_for_selector("#count-justification.over:has-text('2,001 / 2,000')")
    assert len(page.input_value("#id_justification")) == 2001  # nothing cut by the browser
    shot(page, "request_new_too_long")
    page.click("button:has-text('Submit request')")
    page.wait_for_selector("#errors-justification:has-text('at most 2000 characters')")
    assert len(page.input_value("#id_justification")) == 2001  # kept to be shortened
    assert not QuotaRequest.objects.exists()
