"""The idle banner with "Bring it back" on a report card, and the showback panel
on the Spend page, in headless Chromium at 390 and 1440 px, light and dark:
nothing wider than the screen, the button reachable; screenshots in /tmp/shots/."""

from datetime import UTC, datetime, timedelta

import pytest

from idle.models import IdleAction, IdleState
from tests.billing.ledger import meter, workload
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)
SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def test_the_banner_and_the_showback_look_right(
    transactional_db,
    page,  # noqa: F811
    alice,
    carol,
    vision,
    h100,
):
    meter(
        HOUR,
        workloads={(vision, "vision", "Deployment", "notebook", h100): workload(7200, 0, 7200)},
    )
    IdleState.objects.create(
        team=vision,
        flavor=h100,
        namespace="vision",
        kind="Deployment",
        name="notebook",
        gpus=2,
        seen_at=HOUR,
        idle_since=HOUR,
        announced_at=HOUR + timedelta(minutes=10),
        action_due_at=HOUR + timedelta(minutes=15),
        acted_at=HOUR + timedelta(minutes=15),
    )
    IdleAction.objects.create(
        team=vision,
        flavor=h100,
        namespace="vision",
        workload_kind="Deployment",
        workload_name="notebook",
        kind="scaled_to_zero",
        mode="act",
        at=HOUR + timedelta(minutes=15),
        gpus=2,
        ended_at=HOUR + timedelta(minutes=75),
        gpu_seconds=2 * 3600,
    )
    log_in(page, "alice")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto("/billing/teams/vision/workloads/vision/Deployment/notebook/")
            assert page.is_visible("#idle-banner") and page.is_visible("#bring-back")
            fits = "document.documentElement.scrollWidth <= window.innerWidth"
            assert page.evaluate(fits), f"the report card scrolls sideways at {width} px"
            shot(page, f"idle-banner-{scheme}-{size}")
            page.goto("/billing/teams/vision/?month=2026-11")
            assert page.inner_text("#idle-given-back") == "2"
            assert page.evaluate(fits), f"the Spend page scrolls sideways at {width} px"
            shot(page, f"idle-showback-{scheme}-{size}")

    # Announced, not yet acted on: its manager may exempt it from the card.
    IdleState.objects.filter(name="notebook").update(acted_at=None)
    page.click("button:has-text('Log out')")
    log_in(page, "carol")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto("/billing/teams/vision/workloads/vision/Deployment/notebook/")
        page.click("summary:has-text('Exempt it')")
        assert page.is_visible("#exempt-reason") and page.evaluate(fits)
        shot(page, f"idle-exempt-{scheme}-phone")
