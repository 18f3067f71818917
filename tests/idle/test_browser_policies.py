"""The idle policies page and the team page's panel, and the cluster page's GPU
nodes joined with GPU health, in headless Chromium at 390 and 1440 px, light and
dark: nothing wider than the screen, a looser policy refused beside its field;
screenshots in /tmp/shots/."""

import pytest

from cluster import actions as cluster_actions
from idle import actions
from tests.provisioning.test_capacity_can_run import cordon, xids  # noqa: F401
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}
FITS = "document.documentElement.scrollWidth <= window.innerWidth"


def test_a_manager_sets_a_stricter_policy_and_is_refused_a_looser_one(
    transactional_db,
    page,  # noqa: F811
    admin_user,
    carol,
    vision,
    h100,
):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=30, grace_minutes=15, mode="act")
    log_in(page, "carol")
    page.goto("/idle/policies/?team=vision")
    page.select_option("#id_flavor", "h100")
    page.fill("#id_idle_minutes", "60")
    page.fill("#id_grace_minutes", "10")
    page.select_option("#id_mode", "act")
    page.click("button:has-text('Set policy')")
    assert "At most 30, the flavor's policy." in page.inner_text("#errors-idle_minutes")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            assert page.evaluate(FITS), f"the refused form scrolls sideways at {width} px"
            shot(page, f"idle-policies-refused-{scheme}-{size}")
    page.fill("#id_idle_minutes", "10")
    page.click("button:has-text('Set policy')")
    assert "Idle policy set" in page.inner_text("main")
    in_force = page.inner_text("#applying-h100 tr.in-force")
    assert "10 min" in in_force and "10 min" in in_force.split("10 min", 1)[1]
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto("/idle/policies/?team=vision")
            assert page.evaluate(FITS), f"the policies page scrolls sideways at {width} px"
            shot(page, f"idle-policies-{scheme}-{size}")
            page.goto("/teams/vision/")
            assert page.is_visible("#idle-policies")
            assert page.evaluate(FITS), f"the team page scrolls sideways at {width} px"
            shot(page, f"idle-team-panel-{scheme}-{size}")


@pytest.mark.prometheus
def test_the_cluster_page_shows_what_cannot_run(
    transactional_db,
    cluster,
    xids,  # noqa: F811
    page,  # noqa: F811
    admin_user,
    h100,
):
    cordon(cluster, "gpu-h100-1")
    cluster_actions.record_inventory()
    log_in(page, "admin")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto("/cluster/")
            row = page.inner_text("#node-gpu-h100-0")
            assert "GPU 2: XID 79, out of service" in row
            assert "cordoned" in page.inner_text("#node-gpu-h100-1")
            page.locator("#gpu-nodes").screenshot(
                path=f"/tmp/shots/cluster-gpu-health-{scheme}-{size}.png"
            )
