"""Pages that hold together (issue 18) in headless Chromium: a decision made in
place leaves the review queue's page whole, and no table is cut off at a phone's
or a laptop's width.

Screenshots go to /tmp/shots/.
"""

from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone
from playwright.sync_api import expect

from cluster import kube
from cluster.actions import record_inventory
from cluster.models import Flavor
from kubesim.testing import running_kubesim
from tests.billing.ledger import meter, workload
from tests.web.test_browser_daily import PAGES, company  # noqa: F401 - a fixture
from tests.web.test_browser_journey import browser, log_in, page, shot  # noqa: F401

pytestmark = pytest.mark.browser


def queue_structure(tab):
    """What the review queue's page is made of, as a person reading it would list it."""
    return tab.evaluate(
        """() => ({
            queueRows: [...document.querySelectorAll('table.queue > tbody > tr')]
                .map(tr => tr.id.startsWith('req-') ? 'request' : 'other: ' + tr.innerText),
            upcomingRows: document.querySelectorAll('#upcoming-capacity tbody tr').length,
            upcomingCards: document.querySelectorAll('#upcoming-capacity').length,
            timelineHeads: [...document.querySelectorAll('#queue-timeline > .card-head > h2')]
                .map(h => h.innerText),
            timelineForms: document.querySelectorAll('#queue-timeline > .card-head > form').length,
            figures: document.querySelectorAll('#queue-timeline figure').length,
            summaries: document.querySelectorAll('#queue-summary').length,
            sections: [...document.querySelectorAll('main > section, .page > section')]
                .map(s => s.id || s.querySelector('h2')?.innerText || 'queue'),
        })"""
    )


def test_approving_in_place_keeps_the_page_whole(page, company, admin_user):  # noqa: F811
    first = company["pending"][1]  # carol's 6 x H100: fits
    log_in(page, "admin")
    page.goto("/review/")
    before = queue_structure(page)
    assert before["upcomingRows"] == 2 and before["queueRows"] == ["request"] * 3

    page.evaluate("window.stillHere = true")
    page.locator(f"#req-{first.pk} input[name=reason]").fill("Go ahead")
    page.locator(f"#req-{first.pk} button:has-text('Approve')").click()
    page.wait_for_selector(f"#req-{first.pk} .badge.status-approved")
    page.wait_for_selector("#queue-summary:has-text('2 pending requests')")
    assert page.evaluate("window.stillHere") is True
    shot(page, "review_queue_approved_in_place")

    after = queue_structure(page)
    # The same page: the upcoming capacity stays in its card, the queue's table holds
    # only requests, the timeline keeps its heading and flavor menu.
    assert after == before
    assert page.locator("#upcoming-capacity").is_visible()
    assert "H100" in page.locator("#upcoming-capacity tbody").inner_text()
    assert page.locator("#queue-timeline figure figcaption").inner_text().startswith("H100")


def overflowing_tables(tab):
    """Tables wider than the box they scroll in, with whether that box shows it can scroll."""
    return tab.evaluate(
        """() => [...document.querySelectorAll('table')].flatMap(table => {
            let box = table.parentElement;
            while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) {
                box = box.parentElement;
            }
            box = box || document.documentElement;
            if (box.scrollWidth <= box.clientWidth + 1) return [];
            const style = getComputedStyle(box);
            return [{
                table: (table.querySelector('th')?.innerText || table.innerText).slice(0, 30),
                width: table.scrollWidth,
                room: box.clientWidth,
                hinted: style.backgroundImage.includes('gradient')
                    && style.backgroundAttachment.includes('local'),
            }];
        })"""
    )


@pytest.fixture
def metered(company, vision, nlp, h100, a100):  # noqa: F811
    """Metered hours in the month the Spend pages show (this one, or the last one in
    a month's first days), and the demo cluster's inventory read from kubesim, so the
    Spend and cluster pages have rows in every table."""
    this_hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    last_month = this_hour.replace(day=1, hour=0) - timedelta(hours=1)
    held = (4 * 3600, 3 * 3600, 3600, 0)  # GPU-seconds: allocated, active, idle, unmetered
    shapes = [
        (vision, h100, "vision", "train-detector-with-a-long-name-0"),
        (vision, a100, "vision", "notebook"),
        (nlp, a100, "nlp", "finetune-llama"),
    ]
    for hour in (this_hour - timedelta(hours=1), last_month):
        meter(
            hour,
            teams={(team, flavor): held for team, flavor, _, _ in shapes},
            workloads={
                (team, ns, "Job", name, flavor): workload(*held, gpus=4)
                for team, flavor, ns, name in shapes
            },
        )
    # The flavors as the demo cluster's GPU Feature Discovery labels them.
    for flavor, product in ((h100, "NVIDIA-H100-80GB-HBM3"), (a100, "NVIDIA-A100-SXM4-80GB")):
        Flavor.objects.filter(pk=flavor.pk).update(
            node_selector={"nvidia.com/gpu.product": product}
        )
    with running_kubesim() as sim:
        cluster = kube.Cluster(kube.load_configuration(sim.kubeconfig_path), timeout=10)
        try:
            assert record_inventory(cluster=cluster) == 17
        finally:
            cluster.close()
    return company


@pytest.mark.parametrize("width", [390, 1440])
def test_no_table_is_cut_off(browser, live_server, metered, width):  # noqa: F811
    """At a laptop's width every table fits; at a phone's, a table that cannot scrolls
    in its card, which shades the edge that hides columns."""
    long_one = metered["pending"][-1]
    pages = PAGES + [
        ("alice", f"/requests/{long_one.pk}/"),
        ("alice", "/billing/"),
        ("admin", f"/requests/{long_one.pk}/"),
        ("admin", "/billing/"),
        ("admin", "/billing/admin/"),
        ("admin", "/billing/health/"),
        ("admin", "/batch/"),
        ("admin", "/webhooks/"),
    ]
    found = {}
    try:
        for user in ("alice", "admin"):
            context = browser.new_context(
                base_url=live_server.url, viewport={"width": width, "height": 900}
            )
            tab = context.new_page()
            tab.set_default_timeout(10_000)
            log_in(tab, user)
            for _, path in [p for p in pages if p[0] == user]:
                tab.goto(path)
                wide = overflowing_tables(tab)
                # A laptop has room for every table; a phone may scroll one, if it says so.
                if wide and (width > 1000 or not all(t["hinted"] for t in wide)):
                    found[user, path] = wide
                page_width = tab.evaluate("document.documentElement.scrollWidth")
                if page_width > width:
                    found[user, path, "page"] = page_width
            tab.goto("/billing/")
            shot(tab, f"spend_{user}_{width}")
            if user == "admin":
                tab.goto("/review/")
                shot(tab, f"review_queue_{width}")
                tab.goto("/cluster/")
                shot(tab, f"cluster_{width}")
            context.close()
    finally:
        connections.close_all()  # see the page fixture
    assert found == {}


def test_the_small_things_hold_together(page, company, alice):  # noqa: F811
    """The spot checkbox on its label's line, the message after a comment in view, the
    API docs under the site's header, and the admin's menu on one line at 1440 px."""
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, "alice")
    page.goto("/batch/jobs/new/")
    box = page.locator("#id_spot_allowed").bounding_box()
    words = page.locator("label[for=id_spot_allowed]").bounding_box()
    assert abs((box["y"] + box["height"] / 2) - (words["y"] + words["height"] / 2)) < 4
    assert words["x"] <= box["x"] < words["x"] + words["width"]  # inside the label, first
    page.locator("label[for=id_spot_allowed]").scroll_into_view_if_needed()
    shot(page, "batch_job_new_spot")

    long_one = company["pending"][-1]
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/requests/{long_one.pk}/")
    page.fill("#comment-body", "Could it start on Monday?")
    page.click("button:has-text('Comment')")
    message = page.locator("#comments .message.success")
    message.wait_for()
    assert message.is_visible() and "Comment added" in message.inner_text()
    # The browser scrolls to #comments once the page has loaded, after the message is
    # in the DOM: wait for it to come into view (it never did when the redirect lost
    # its fragment).
    expect(message).to_be_in_viewport(ratio=1)
    shot(page, "comment_added_390")

    page.set_viewport_size({"width": 1440, "height": 900})
    page.click("button:has-text('Log out')")
    log_in(page, "admin")
    heights = page.evaluate(
        "() => [...document.querySelectorAll('.nav-links > a, .nav-links form, .nav .brand')]"
        ".map(e => Math.round(e.getBoundingClientRect().top))"
    )
    assert len(set(heights)) == 1  # one line
    page.goto("/api/docs/")
    header = page.locator("header.topbar")
    assert header.locator("text=Review queue").is_visible()
    assert header.locator("a[aria-current=page]").inner_text() == "API docs"
    page.wait_for_selector("#swagger-ui .info")
    shot(page, "api_docs_1440")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_batch_calendar_and_the_timeline_show_windows_by_name(
    browser,  # noqa: F811
    live_server,
    company,  # noqa: F811
    admin_user,
    alice,
    vision,
    h100,
    scheme,
):
    from datetime import time

    from batch import actions as batch_actions
    from batch.models import ImageRule

    ImageRule.objects.create(prefix="nvcr.io/nvidia/")
    batch_actions.save_window(
        None,
        by=admin_user,
        capacity={h100: 4},
        name="Nights",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(20),
        end_time=time(4),
        exceptions=[],
        price_factor="0.5",
    )
    for name, minutes in (("embed", 120), ("eval", 60)):
        batch_actions.submit(
            by=alice,
            team=vision,
            flavor=h100,
            name=name,
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            gpus=2,
            expected_runtime_minutes=minutes,
            max_runtime_minutes=minutes,
        )
    batch_actions.replan()
    try:
        for width in (1440, 390):
            context = browser.new_context(
                base_url=live_server.url,
                viewport={"width": width, "height": 900},
                color_scheme=scheme,
            )
            tab = context.new_page()
            tab.set_default_timeout(10_000)
            log_in(tab, "alice")
            tab.goto("/batch/")
            week = tab.locator("#calendar-h100 .week")
            assert week.locator(".week-day").count() == 7
            assert week.locator("a.job.mine").count() >= 2
            first = week.locator(".block").first
            assert "Nights" in first.inner_text()
            # The table stays, for screen readers and copying, behind a summary.
            tab.click("#calendar-h100 summary")
            assert tab.locator("#calendar-h100 table.data tbody tr").count() >= 7
            shot(tab, f"batch_calendar_{width}_{scheme}")
            tab.goto("/timeline/?flavor=h100")
            chart = tab.locator("#timeline-h100")
            assert chart.locator("g.bar.window").count() >= 28
            # Named once, on the line above its row (shortened on a phone).
            labels = chart.locator("g.bar.window text").filter(visible=True)
            name = "Nights (batch window) · 4 GPUs" if width > 640 else "Nights (batch window) ·…"
            assert labels.all_text_contents() == [name]
            assert chart.locator(".legend").is_visible()
            shot(tab, f"timeline_window_{width}_{scheme}")
            context.close()
    finally:
        connections.close_all()  # see the page fixture
