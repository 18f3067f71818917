"""The daily pages in headless Chromium: the request list and its filters, the
timeline beside the review queue, and every page at phone width (390 px).

Screenshots go to /tmp/shots/; the README's come from here:
PORTAL_KEEP_SCREENSHOTS=1 .venv/bin/pytest tests/web/test_browser_daily.py
"""

import os
import shutil
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from gpu_requests import actions
from tests.factories import next_week, submit
from tests.web.test_browser_journey import SHOTS, browser, log_in, log_out, page, shot  # noqa: F401

pytestmark = pytest.mark.browser
README_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
LONG_WORD = "x" * 2000


@pytest.fixture
def company(transactional_db, alice, bob, carol, vision, nlp, admin_user, h100, a100):
    """A few teams' worth of requests: approved, pending, one with a 2,000-character word."""
    a100.refresh_from_db()
    held = [
        actions.approve(submit(nlp, a100, bob, gpus=6, starts_at=next_week(days=3)), by=admin_user),
        actions.approve(
            submit(vision, h100, alice, gpus=8, starts_at=next_week(days=1), hours=240),
            by=admin_user,
        ),
        actions.approve(
            submit(nlp, h100, bob, gpus=4, starts_at=next_week(days=5), hours=96), by=admin_user
        ),
    ]
    pending = [
        submit(nlp, a100, bob, gpus=12, starts_at=next_week(days=3), reason="Pretrain a 7B model"),
        submit(vision, h100, carol, gpus=6, starts_at=next_week(days=4), reason="Detector sweep"),
        submit(vision, h100, alice, gpus=2, starts_at=next_week(days=9), reason=LONG_WORD),
    ]
    actions.reject(submit(vision, a100, carol, gpus=1), by=admin_user, reason="Use the H100s")
    return {"held": held, "pending": pending}


def keep(name):
    """Copy a screenshot into docs/screenshots/ for the README, when asked to
    (PORTAL_KEEP_SCREENSHOTS=1): a test run leaves the working tree alone."""
    if not os.environ.get("PORTAL_KEEP_SCREENSHOTS"):
        return
    README_SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHOTS / f"{name}.png", README_SHOTS / f"{name}.png")


def test_alice_finds_a_request_with_the_filters_and_shares_the_address(page, company):  # noqa: F811
    log_in(page, "alice")
    page.click("nav >> text=Requests")
    page.select_option("#id_status", "rejected")
    page.fill("#id_q", "h100s")
    page.click("button:has-text('Filter')")
    page.wait_for_selector("text=1 request matches")
    address = page.url
    assert "status=rejected" in address and "q=h100s" in address
    assert page.locator("tbody tr").count() == 1
    # The same address, opened fresh, shows the same list; a column head sorts it.
    page.goto("/requests/")
    page.goto(address)
    assert page.locator("tbody tr").count() == 1
    page.goto("/requests/")
    page.click("th >> text=GPUs")
    page.wait_for_url("**sort=gpus**")
    gpus = [int(t.split(" ")[0]) for t in page.locator("td[data-label=GPUs]").all_inner_texts()]
    assert gpus == sorted(gpus)


def test_the_review_queue_shows_the_timeline_of_the_first_rows_flavor(page, company):  # noqa: F811
    log_in(page, "admin")
    page.click("nav >> text=Review queue")
    figure = page.locator("#queue-timeline figure")
    assert "A100 80GB" in figure.locator("figcaption").inner_text()
    page.select_option("#queue-timeline-flavor", "h100")
    page.click("#queue-timeline button")
    page.wait_for_selector("#timeline-h100")
    bars = page.locator("#timeline-h100 g.bar").count()
    assert bars == 4  # two approved, two pending
    shot(page, "review_queue_timeline")
    keep("review_queue_timeline")
    page.goto("/")
    shot(page, "dashboard_admin")
    keep("dashboard_admin")


PAGES = [
    ("alice", "/"),
    ("alice", "/requests/"),
    ("alice", "/requests/new/"),
    ("alice", "/timeline/"),
    ("admin", "/review/"),
    ("admin", "/requests/?status=pending"),
    ("admin", "/cluster/"),
    ("admin", "/timeline/?flavor=a100"),
    ("alice", "/teams/vision/"),
    ("admin", "/teams/new/"),
    ("alice", "/batch/"),
    ("alice", "/batch/jobs/"),
    ("alice", "/batch/jobs/new/"),
]


def test_no_page_scrolls_sideways_at_phone_width(browser, live_server, company):  # noqa: F811
    long_one = company["pending"][-1]
    pages = PAGES + [("alice", f"/requests/{long_one.pk}/"), ("admin", f"/requests/{long_one.pk}/")]
    wide = []
    try:
        for user in ("alice", "admin"):
            context = browser.new_context(
                base_url=live_server.url, viewport={"width": 390, "height": 844}
            )
            phone = context.new_page()
            phone.set_default_timeout(10_000)
            log_in(phone, user)
            for _, path in [p for p in pages if p[0] == user]:
                phone.goto(path)
                width = phone.evaluate("document.documentElement.scrollWidth")
                if width > 390:
                    wide.append((path, width))
            if user == "alice":
                # The menu folds away, and opens without JavaScript.
                assert not phone.locator("nav >> text=Timeline").is_visible()
                phone.click("label[for=nav-toggle]")
                assert phone.locator("nav >> text=Timeline").is_visible()
                phone.goto(f"/requests/{long_one.pk}/")
                shot(phone, "phone_request_detail")
                keep("phone_request_detail")
            context.close()
    finally:
        connections.close_all()  # see the page fixture
    assert wide == []


def test_alice_asks_for_more_time_and_the_chain_shows(page, company):  # noqa: F811
    held = company["held"][1]  # alice's 8 x H100 for ten days
    log_in(page, "alice")
    page.goto(f"/requests/{held.pk}/")
    page.click("text=Ask for more time")
    page.wait_for_selector("h1:has-text('Request GPU quota')")
    # Pre-filled: from the end, as long again, the same GPUs.
    assert page.input_value("#id_gpus") == "8"
    assert page.input_value("#id_starts_at") == f"{held.ends_at:%Y-%m-%dT%H:%M}"
    page.fill("#id_justification", f"Follows #{held.pk}: the sweep needs ten more days")
    page.click("button:has-text('Submit request')")
    page.wait_for_selector("text=submitted for review")
    page.wait_for_selector(f"text=#{held.pk}")
    assert "(more time)" in page.locator(".facts").inner_text()
    page.goto(f"/requests/{held.pk}/")
    assert "more time" in page.locator(".facts").inner_text()
    assert "Follow-up asked" in page.locator("section:has(h2:has-text('History'))").inner_text()


def test_a_manager_adds_a_member_who_then_sees_the_team(page, company, carol):  # noqa: F811
    from tests.factories import UserFactory

    UserFactory(username="dave", email="dave@example.com")
    log_in(page, "carol")  # vision's manager
    page.click("#team-vision h2 a")
    page.fill("#id_who", "dave@example.com")
    page.click("button:has-text('Add member')")
    page.wait_for_selector("text=dave added to Vision as member.")
    assert "Member added" in page.locator("#history").inner_text()
    log_out(page)
    log_in(page, "dave")
    assert page.locator("#team-vision").count() == 1
    page.click("nav >> text=Requests")
    assert page.locator("tbody tr").count() >= 3


AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"


def serious_violations(page, exclude=()):  # noqa: F811
    """axe-core's serious and critical findings on the page as it stands, outside `exclude`
    (CSS selectors)."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "async (exclude) => (await axe.run({include: [['html']], exclude: exclude.map(s => [s])},"
        " {resultTypes: ['violations']})).violations"
        ".filter(v => ['serious', 'critical'].includes(v.impact))"
        ".map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))",
        list(exclude),
    )
    return found


def test_axe_finds_nothing_serious_on_any_page(browser, live_server, company):  # noqa: F811
    found = {}
    long_one = company["pending"][-1]
    pages = PAGES + [("alice", f"/requests/{long_one.pk}/"), ("admin", "/api/docs/")]
    try:
        for scheme in ("light", "dark"):
            for user in ("alice", "admin"):
                # bypass_csp: axe is injected as an inline script, which the CSP refuses.
                context = browser.new_context(
                    base_url=live_server.url, color_scheme=scheme, bypass_csp=True
                )
                tab = context.new_page()
                tab.set_default_timeout(10_000)
                log_in(tab, user)
                for _, path in [p for p in pages if p[0] == user]:
                    tab.goto(path)
                    # Swagger UI's own widget (third-party markup: buttons in buttons) is
                    # left out; the portal's header on that page is checked.
                    swagger = ["#swagger-ui"] if path == "/api/docs/" else []
                    problems = serious_violations(tab, swagger)
                    if problems:
                        found[scheme, path] = problems
                context.close()
    finally:
        connections.close_all()
    assert found == {}


def test_the_review_queue_works_from_the_keyboard(page, company):  # noqa: F811
    first = company["pending"][1]  # carol's 6 x H100: fits
    log_in(page, "admin")
    page.goto("/review/")
    page.focus(f"#req-{first.pk} input[name=reason]")
    page.keyboard.type("Fine by keyboard")
    page.keyboard.press("Tab")  # to Approve
    assert page.evaluate("document.activeElement.textContent") == "Approve"
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#req-{first.pk} .badge.status-approved")
    assert "approved." in page.locator(f"#req-{first.pk}").inner_text()


def test_the_browsers_time_zone_is_stored_at_the_first_login(browser, live_server, alice):  # noqa: F811
    from gpu_requests.models import UserPreference

    context = browser.new_context(base_url=live_server.url, timezone_id="Europe/Lisbon")
    tab = context.new_page()
    try:
        log_in(tab, "alice")
        deadline = 50
        while not UserPreference.objects.filter(user=alice).exists() and deadline:
            tab.wait_for_timeout(100)  # polls a condition (the browser's POST), bounded
            deadline -= 1
        assert UserPreference.objects.get(user=alice).time_zone == "Europe/Lisbon"
        tab.reload()
        assert "Times are shown in Europe/Lisbon" in tab.locator("footer").inner_text()
    finally:
        context.close()
        connections.close_all()


def test_the_namespace_panel_fits_a_phone_and_copies(
    browser,  # noqa: F811
    live_server,
    transactional_db,
    alice,
    vision,
    h100,
    admin_user,
    settings,
):
    """The team page with its "How to use your namespace" panel filled: a kubeconfig
    and an example Job (long YAML lines) scroll inside their card, not the page."""
    settings.PORTAL_CLUSTER_API_URL = "https://api.gpu-cluster.example.org:6443"
    settings.PORTAL_CLUSTER_OIDC_ISSUER = "https://sso.example.org/realms/research-computing"
    settings.PORTAL_CLUSTER_OIDC_CLIENT_ID = "kubernetes"
    actions.approve(submit(vision, h100, alice, gpus=2, starts_at=timezone.now()), by=admin_user)
    try:
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 390, "height": 844}
        )
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        phone = context.new_page()
        phone.set_default_timeout(10_000)
        log_in(phone, "alice")
        phone.goto("/teams/vision/")
        panel = phone.locator("#namespace-howto")
        assert "gpu-check-h100" in panel.locator("pre#example-h100").inner_text()
        width = phone.evaluate("document.documentElement.scrollWidth")
        shot(phone, "phone_team_namespace")
        # With JavaScript the copy button shows and copies the manifest as it stands.
        phone.click("button[data-copy=example-h100]")
        phone.wait_for_selector("button[data-copy=example-h100]:has-text('Copied')")
        copied = phone.evaluate("navigator.clipboard.readText()")
        context.close()
    finally:
        connections.close_all()  # see the page fixture
    assert width <= 390
    assert "kind: Job" in copied and "nvidia.com/gpu: '1'" in copied
