"""Quota nobody uses, in headless Chromium at 390 and 1440 px, light and dark: the
manager sees it on the dashboard and the Spend page, gives it back with one click,
and the admins see the team on the overview. Screenshots in /tmp/shots/."""

import pytest
import time_machine

from gpu_requests.models import QuotaRequest
from tests.billing.unused_month import NOW, unused_month
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def _fits(tab):
    return tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.fixture
def held(transactional_db, grant, vision, nlp, alice, bob, catalog):
    quota_request, _ = unused_month(grant, vision, nlp, alice, bob, catalog["l4"], catalog["h100"])
    return quota_request


def test_the_manager_sees_quota_nobody_uses_and_gives_it_back(
    held,
    page,  # noqa: F811
    carol,
):
    with time_machine.travel(NOW, tick=False):
        log_in(page, "carol")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                page.set_viewport_size({"width": width, "height": height})
                for name, url in (("dashboard", "/"), ("spend", "/billing/teams/vision/")):
                    page.goto(url)
                    note = page.locator("#unused-vision")
                    assert note.is_visible()
                    assert _fits(page), f"{url} scrolls sideways at {width} px"
                    shot(page, f"unused_{name}_{size}_{scheme}")
        page.goto("/")
        note = page.locator("#unused-vision")
        assert note.locator(".unused-cost").inner_text() == "48.00 USD"
        assert "48 of 48 reserved GPU-hours unallocated" in note.inner_text()

        note.get_by_role("button", name=f"Give back request #{held.pk}").click()
        page.wait_for_selector(f".message:has-text('Request #{held.pk} ended early.')")
        assert page.url.endswith("/")
        assert page.locator("#unused-vision").count() == 0
        assert QuotaRequest.objects.get(pk=held.pk).status == QuotaRequest.Status.EXPIRED
        page.goto(f"/requests/{held.pk}/")
        assert "Given back (was until 2026-12-01 00:00 UTC)" in page.inner_text("body")


def test_the_admins_see_the_team_on_the_overview(
    held,
    page,  # noqa: F811
    admin_user,
):
    with time_machine.travel(NOW, tick=False):
        log_in(page, "admin")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for size, (width, height) in SIZES.items():
                page.set_viewport_size({"width": width, "height": height})
                page.goto("/billing/admin/")
                assert _fits(page), f"the overview scrolls sideways at {width} px"
                shot(page, f"unused_admin_{size}_{scheme}")
        rows = page.locator("#unused-quota tbody tr")
        assert rows.count() == 1
        assert rows.first.inner_text().split("\t")[:4] == [
            "Vision",
            "L4 24GB (spot)",
            "48 of 48",
            "48.00 USD",
        ]
        rows.first.get_by_role("link", name="Vision").click()
        page.wait_for_selector("#unused-vision")
