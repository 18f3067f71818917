"""The Spend pages' "Download FOCUS (CSV)" button, in headless Chromium at 390 and
1440 px, light and dark: it downloads the month's FOCUS file, a manager's for
their team. Screenshots in /tmp/shots/."""

import csv
import io
from datetime import UTC, datetime

import pytest
from django.db import connections

from tests.billing.ledger import meter
from tests.web.test_browser_journey import browser, log_in, shot  # noqa: F401

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}
HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("username", "page", "teams"),
    [
        ("admin", "/billing/admin/", {"vision", "nlp"}),
        ("carol", "/billing/teams/vision/", {"vision"}),
    ],
)
def test_the_spend_page_downloads_the_months_focus_file(
    transactional_db,
    browser,  # noqa: F811
    live_server,
    admin_user,
    carol,
    vision,
    nlp,
    h100,
    username,
    page,
    teams,
):
    meter(HOUR, teams={(vision, h100): (3600, 1800, 1800, 0), (nlp, h100): (7200, 7200, 0, 0)})
    context = browser.new_context(base_url=live_server.url, accept_downloads=True)
    try:
        tab = context.new_page()
        tab.set_default_timeout(10_000)
        log_in(tab, username)
        tab.goto(f"{page}?month=2026-11")
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                tab.set_viewport_size({"width": width, "height": height})
                shot(tab, f"focus_button_{username}_{size}_{scheme}")
        with tab.expect_download() as download:
            tab.click("text=Download FOCUS (CSV)")
        # Read before the context closes: closing it deletes the download.
        text = download.value.path().read_text(encoding="utf-8")
        name = download.value.suggested_filename
    finally:
        context.close()
        connections.close_all()  # see the page fixture in tests/web/test_browser_journey.py
    rows = list(csv.DictReader(io.StringIO(text)))
    assert name.startswith("focus-") and name.endswith("2026-11.csv")
    assert {row["SubAccountId"] for row in rows} == teams
    assert {row["ChargeCategory"] for row in rows} == {"Usage"}
