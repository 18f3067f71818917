"""Cancelling a batch job in headless Chromium without JavaScript: the page's
button leads to a confirmation that holds the POST; at 390 and 1440 px, light
and dark. Screenshots in /tmp/shots/."""

import pytest
from django.db import connections

from batch import actions
from batch.models import BatchJob
from tests.batch.conftest import job_data
from tests.web.test_browser_journey import browser, log_in, shot  # noqa: F401

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def test_cancel_asks_first_and_works_without_javascript(
    transactional_db,
    browser,  # noqa: F811
    live_server,
    allowlist,
    nightly,
    alice,
    vision,
    h100,
):
    data = job_data(team=vision, flavor=h100, name="train-resnet")
    job = actions.submit(by=alice, **data)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        tab = context.new_page()
        tab.set_default_timeout(10_000)
        log_in(tab, "alice")
        tab.goto(f"/batch/jobs/{job.pk}/")
        shot(tab, "batch_job_detail_cancel_link")
        tab.click("a:has-text('Cancel job…')")
        tab.wait_for_selector(f"h1:has-text('Cancel batch job #{job.pk} (train-resnet)?')")
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                tab.set_viewport_size({"width": width, "height": height})
                fits = tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
                assert fits, f"the confirmation scrolls sideways at {width} px"
                shot(tab, f"batch_cancel_confirm_{size}_{scheme}")
        job.refresh_from_db()
        assert job.status in BatchJob.PLANNABLE  # the page alone changes nothing

        tab.click("a:has-text('Keep it')")
        tab.wait_for_selector(f"h1:has-text('Batch job #{job.pk}')")
        tab.click("a:has-text('Cancel job…')")
        tab.fill("#confirm-reason", "wrong data set")
        tab.click("button:has-text('Cancel job')")
        tab.wait_for_selector(f"text=Batch job #{job.pk} cancelled.")
        shot(tab, "batch_cancel_done")
    finally:
        context.close()
        connections.close_all()  # see the page fixture in tests/web/test_browser_journey.py
    job.refresh_from_db()
    assert job.status == BatchJob.Status.CANCELLED
    assert job.events.get(action="cancel").reason == "wrong data set"
