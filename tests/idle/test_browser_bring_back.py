"""In Chromium, on both cluster backends: the idle notice's link opens the
notebook's report card with the banner; "Bring it back" restores its replicas on
the cluster as a plain form POST (JavaScript off) and, scaled to zero again, with
htmx (the banner swapped in place). The team's home page says it was scaled to
zero, when and why, and links the card. Screenshots in /tmp/shots/."""

from urllib.parse import urlparse

import pytest
from django.core import mail

from idle import actions
from tests.idle.test_notice_to_card import (  # noqa: F401 (fixtures)
    CARD,
    prometheus,
    prometheus_url,
    run,
)
from tests.idle.test_scale_to_zero import deployments  # noqa: F401 (fixture)
from tests.waiting import wait_for
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser


def replicas(cluster):
    return cluster.get("Deployment", "notebook", "vision")["spec"]["replicas"]


def notice_link():
    (notice,) = [m for m in mail.outbox if "scaled to zero" in m.subject]
    mail.outbox.clear()
    link = next(word for word in notice.body.split() if "/billing/teams/" in word)
    return urlparse(link).path


# The 24-hour strip's time labels that overprint another (those shown).
OVERPRINTED = """() => {
  const boxes = [...document.querySelectorAll('svg.heat-axis text')]
    .map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, b]) => b.width > 0);
  return boxes.flatMap(([a, b], i) => boxes.slice(i + 1)
    .filter(([, c]) => Math.min(b.right, c.right) - Math.max(b.left, c.left) > 0)
    .map(([c]) => `${a} / ${c}`));
}"""


def test_the_notice_opens_the_card_and_bring_it_back_restores_the_replicas(
    transactional_db,
    prometheus,  # noqa: F811
    deployments,  # noqa: F811
    browser,  # noqa: F811
    live_server,
    page,  # noqa: F811
    admin_user,
    alice,
    h100,
    vision,
):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    run(range(1, 17))
    assert replicas(deployments) == 0
    link = notice_link()
    assert link == CARD

    # Without JavaScript: the form posts, the card comes back with what was done.
    plain = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    without_js = plain.new_page()
    log_in(without_js, "alice")
    without_js.goto(link)
    assert without_js.is_visible("#idle-banner")
    assert "Scaled to zero for being idle" in without_js.inner_text("#idle-banner")
    without_js.click("#bring-back")
    without_js.wait_for_selector("#messages")
    assert "Deployment notebook is back: 2 replica(s)." in without_js.inner_text("#messages")
    assert without_js.url.endswith(CARD)
    assert replicas(deployments) == 2
    plain.close()

    # Idle again: scaled to zero again, and brought back with htmx this time.
    run(range(17, 33))
    assert replicas(deployments) == 0
    link = notice_link()
    log_in(page, "alice")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, (width, height) in {"phone": (390, 844), "laptop": (1440, 900)}.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto("/teams/vision/")
            panel = page.inner_text("#idle-scaled")
            assert "Deployment notebook was scaled to zero at" in panel
            assert "had been idle (engine activity under 5 %) since" in panel
            fits = "document.documentElement.scrollWidth <= window.innerWidth"
            assert page.evaluate(fits), f"the team page scrolls sideways at {width} px"
            shot(page, f"idle-team-panel-{scheme}-{size}")
            page.goto(link)
            assert page.evaluate(fits), f"the report card scrolls sideways at {width} px"
            assert page.evaluate(OVERPRINTED) == [], f"the 24-hour axis at {width} px"
            shot(page, f"idle-card-scaled-{scheme}-{size}")
    page.goto("/teams/vision/")
    page.click("#idle-scaled a:has-text('Its report card')")
    page.wait_for_selector("#bring-back")
    assert page.url.endswith(CARD)
    page.click("#bring-back")
    page.wait_for_selector("#idle-banner.success")
    assert page.inner_text("#idle-banner") == "Deployment notebook is back: 2 replica(s)."
    assert page.url.endswith(CARD) and not page.is_visible("#messages")  # swapped in place
    assert wait_for(lambda: replicas(deployments) == 2, timeout=10)
    shot(page, "idle-card-brought-back")
