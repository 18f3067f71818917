"""Pages that tell the truth (issue 35), in headless Chromium: every page, in each
state of its month navigation, at a laptop's width and a phone's, light and dark.

One walk checks what a reader would catch: a page or a chart that scrolls sideways,
a table cut off, an axis label clipped, tiny or printed over another label or a bar,
a chart without its scale, the console's errors. Then what the figures say: a past
month is labelled as past, without a forecast, with that month's budget; today's
partial day is drawn as partial. Screenshots go to /tmp/shots/ (and docs/screenshots/
with PORTAL_KEEP_SCREENSHOTS=1).
"""

from contextlib import suppress
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connections
from playwright.sync_api import Error as PlaywrightError

from billing import actions as billing_actions
from tests.billing.ledger import meter, workload
from tests.waiting import wait_for
from tests.web.test_browser_daily import PAGES, company, keep  # noqa: F401 - a fixture
from tests.web.test_browser_journey import browser, log_in, shot  # noqa: F401

pytestmark = pytest.mark.browser

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)  # today is half metered
CAPACITY = 16  # GPUs of each flavor


@pytest.fixture
def months(company, vision, nlp, carol, h100, a100):  # noqa: F811
    """October and November to today's noon, metered two hours a day, each standing
    for the day's twelve (capacity as a whole day's); today's two for its half day.
    vision's budget was 1,000 in October and is 5,000 since November."""
    with time_machine.travel(datetime(2026, 10, 1, tzinfo=UTC), tick=False):
        billing_actions.set_budget(vision, Decimal("1000"), by=carol)
    with time_machine.travel(datetime(2026, 11, 1, tzinfo=UTC), tick=False):
        billing_actions.set_budget(vision, Decimal("5000"), by=carol)
    day = datetime(2026, 10, 1, tzinfo=UTC)
    while day < NOW:
        share = 6 if day.date() == NOW.date() else 12  # hours each metered hour stands for
        for hour in (9, 11):
            idle = 3600 * (day.day % 4)
            meter(
                day + timedelta(hours=hour),
                teams={
                    (vision, h100): (4 * 3600, 4 * 3600 - idle, idle, 0),
                    (vision, a100): (2 * 3600, 3600, 1800, 1800),
                    (nlp, h100): (3600, 3600, 0, 0),
                },
                workloads={
                    (vision, "vision", "Job", "train", h100): workload(
                        4 * 3600, 4 * 3600 - idle, idle, gpus=4, mean=0.2 + day.day / 40
                    ),
                    (vision, "vision", "Job", "detector-sweep", h100): workload(
                        3600, 3600, gpus=1, mean=0.95
                    ),
                    (vision, "vision", "Pod", "notebook", a100): workload(
                        2 * 3600, 3600, 1800, 1800, gpus=2, mean=0.05
                    ),
                },
                capacity={f.pk: CAPACITY * 3600 * share for f in (h100, a100)},
            )
        day += timedelta(days=1)
    return company


# The pages this issue changed, as docs/screenshots/ shows them.
SHOWN = {
    ("alice", "/billing/teams/vision/"): "spend_team",
    ("alice", "/billing/teams/vision/?month=2026-10"): "spend_team_past_month",
    ("admin", "/billing/admin/"): "spend_admin",
    ("admin", "/review/"): "review_queue_capacity",
}

# What a reader would catch on a page, as a list of sentences (empty: nothing).
PROBLEMS = """() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${page.scrollWidth} px in ${page.clientWidth}`);
  }
  const wide = innerWidth > 1000;
  for (const table of document.querySelectorAll('table')) {
    if (!table.getClientRects().length) continue;
    let box = table.parentElement;
    while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) {
      box = box.parentElement;
    }
    if (wide && box && box.scrollWidth > box.clientWidth + 1) {
      const head = (table.querySelector('th')?.innerText || '').slice(0, 30);
      problems.push(`table "${head}" is cut: ${box.scrollWidth} px in ${box.clientWidth}`);
    }
  }
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const charts = document.querySelectorAll(
    'figure.chart > svg, svg.heat-axis, svg.spark, svg.gantt');
  for (const svg of charts) {
    if (!svg.getClientRects().length) continue;
    const name = svg.closest('[id]')?.id || svg.getAttribute('class');
    const figure = svg.closest('figure') || svg.parentElement;
    if (figure.scrollWidth > figure.clientWidth + 1) problems.push(`${name} scrolls sideways`);
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')]
      .filter(t => t.getClientRects().length)
      .map(t => ({ text: t.textContent, box: t.getBoundingClientRect() }));
    // Its scale: numbers on the chart, or beside it in its cell (a table's sparkline).
    const scale = svg.matches('.spark') ? svg.parentElement.innerText
      : svg.matches('.gantt') ? figure.querySelector('.ticks').innerText : texts.map(t => t.text);
    if (!/\\d/.test(scale)) problems.push(`${name} has no scale`);
    texts.forEach((t, i) => {
      const b = t.box;
      if (b.left < frame.left - 1 || b.right > frame.right + 1
          || b.top < frame.top - 1 || b.bottom > frame.bottom + 1) {
        problems.push(`${name}: "${t.text}" is clipped`);
      }
      if (b.height < 10) problems.push(`${name}: "${t.text}" is ${b.height.toFixed(1)} px tall`);
      texts.slice(i + 1).forEach(u => {
        if (overlap(b, u.box)) problems.push(`${name}: "${t.text}" overprints "${u.text}"`);
      });
      for (const bar of svg.querySelectorAll('rect[data-tip], .gantt .bar rect')) {
        if (overlap(b, bar.getBoundingClientRect())) {
          problems.push(`${name}: "${t.text}" overprints a bar`);
          break;
        }
      }
    });
  }
  // The review queue's capacity per day: a bar a day, drawn.
  for (const day of document.querySelectorAll('#upcoming-capacity tbody td:last-child span')) {
    const box = day.getBoundingClientRect();
    if (box.width < 1 || box.height < 1) {
      problems.push(`a day of the upcoming capacity is not drawn (${day.title})`);
      break;
    }
  }
  // The busiest cells of the idle picture stand out from the card (3:1, WCAG's for graphics).
  const rgb = colour => colour.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const luminance = colour => rgb(colour).map(c => c / 255)
    .map(c => c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  for (const cell of document.querySelectorAll('.heat-strip rect.band-full')) {
    const pattern = document.getElementById(cell.getAttribute('fill').slice(5, -1));
    const fill = luminance(getComputedStyle(pattern.querySelector('rect')).fill);
    const card = luminance(getComputedStyle(cell.closest('.card')).backgroundColor);
    const ratio = (Math.max(fill, card) + 0.05) / (Math.min(fill, card) + 0.05);
    if (ratio < 3) {
      problems.push(`the busiest cells hardly show: ${ratio.toFixed(2)}:1 against the card`);
      break;
    }
  }
  return problems;
}"""


def type_faster_than_the_server(tab):
    """A form checked as it is typed in (htmx): the next keystroke comes while the
    server still answers the last one (held here until then)."""
    held = []
    tab.route("**/*validate=1*", lambda route: held.append(route))
    tab.evaluate(
        "window.triggered = 0;"
        "document.body.addEventListener('htmx:trigger', () => window.triggered++)"
    )
    with tab.expect_request(lambda r: "validate=1" in r.url):
        tab.fill("#id_gpus", "2")
    tab.fill("#id_gpus", "3")
    # (not wait_for_function: its predicate is eval'd in the page, which the CSP refuses)
    wait_for(lambda: tab.evaluate("window.triggered") >= 2, timeout=10)
    tab.unroute("**/*validate=1*")
    for route in held:
        with suppress(PlaywrightError):  # the page may have given up on it
            route.continue_()


def test_every_page_holds_together_in_every_month(browser, live_server, months):  # noqa: F811
    long_one = months["pending"][-1]
    spend = [
        f"/billing/teams/vision/{query}" for query in ("", "?month=2026-10", "?month=2026-12")
    ] + ["/billing/teams/vision/?view=24h"]
    admin_spend = [
        f"/billing/admin/{query}" for query in ("", "?month=2026-10", "?month=2026-12")
    ] + ["/billing/admin/?view=24h"]
    pages = PAGES + [
        ("alice", f"/requests/{long_one.pk}/"),
        ("alice", "/billing/teams/vision/workloads/vision/Job/train/"),
        *(("alice", path) for path in spend),
        *(("admin", path) for path in spend + admin_spend),
        ("admin", "/billing/health/"),
        ("admin", "/webhooks/"),
    ]
    found = {}
    with time_machine.travel(NOW, tick=False):
        try:
            for scheme in ("light", "dark"):
                for width, height in ((1440, 900), (390, 844)):
                    for user in ("alice", "admin"):
                        context = browser.new_context(
                            base_url=live_server.url,
                            viewport={"width": width, "height": height},
                            color_scheme=scheme,
                        )
                        tab = context.new_page()
                        tab.set_default_timeout(10_000)
                        console = []
                        tab.on(
                            "console",
                            lambda m, c=console: c.append(m.text) if m.type == "error" else None,
                        )
                        tab.on("pageerror", lambda e, c=console: c.append(str(e)))
                        log_in(tab, user)
                        for path in (p for u, p in pages if u == user):
                            tab.goto(path)
                            if path in ("/requests/new/", "/batch/jobs/new/"):
                                type_faster_than_the_server(tab)
                            tab.wait_for_load_state("networkidle")
                            problems = tab.evaluate(PROBLEMS) + console
                            if (user, path) in SHOWN:
                                name = f"{SHOWN[user, path]}_{width}_{scheme}"
                                shot(tab, name)
                                keep(name)
                            console.clear()
                            if problems:
                                found[scheme, width, user, path] = problems
                        context.close()
        finally:
            connections.close_all()  # see the page fixture
    assert found == {}


def capacity_lines(tab):
    """Per flavor chart: the y of each point its Capacity line is drawn through."""
    return tab.locator("#flavor-utilisation figure > svg").evaluate_all(
        """svgs => svgs.map(svg => [...svg.querySelectorAll('polyline')]
            .find(line => line.textContent === 'Capacity')
            .getAttribute('points').split(' ').map(point => Number(point.split(',')[1])))"""
    )


def test_the_figures_say_which_month_and_which_day_they_are(browser, live_server, months):  # noqa: F811
    """A past month is labelled as past, has no forecast, and shows its own budget;
    today, half metered, is drawn as partial, not as capacity falling by half."""
    with time_machine.travel(NOW, tick=False):
        try:
            for user in ("alice", "admin"):
                context = browser.new_context(
                    base_url=live_server.url, viewport={"width": 1440, "height": 900}
                )
                tab = context.new_page()
                log_in(tab, user)
                tab.goto("/billing/teams/vision/?month=2026-10")
                assert tab.locator("#summary h2").inner_text() == "Month of October 2026"
                assert tab.locator("#forecast").count() == 0  # a finished month has none
                assert "1,000.00 USD for October 2026" in tab.locator("#budget").inner_text()
                burn = tab.locator("#burn-chart")
                assert "Forecast" not in burn.inner_text()
                assert "Budget" in burn.inner_text() and "1,000" in burn.inner_text()
                tab.goto("/billing/teams/vision/?month=2026-11")
                assert tab.locator("#summary h2").inner_text() == "Month to date"
                assert tab.locator("#forecast").count() == 1
                assert "5,000.00 USD a month" in tab.locator("#budget").inner_text()
                # Today's bars are told apart, and the legend says why they are short.
                # active, idle, unmetered
                assert tab.locator("#daily-chart rect.partial").count() == 3
                legend = tab.locator("#daily-chart figcaption").inner_text()
                assert "20 Nov so far (12 of 24 hours metered): not a whole day" in legend
                if user == "admin":
                    tab.goto("/billing/admin/?month=2026-10")
                    row = tab.locator("#teams tbody tr:has-text('Vision')").inner_text()
                    assert "of 1,000.00 USD" in row
                    tab.goto("/billing/admin/?month=2026-11")
                    row = tab.locator("#teams tbody tr:has-text('Vision')").inner_text()
                    assert "of 5,000.00 USD" in row
                    # Capacity stays level: today's half day is a point of its own.
                    lines = capacity_lines(tab)
                    assert len(lines) == 2 and all(len(set(ys)) == 1 for ys in lines), lines
                    figure = tab.locator("#flavor-utilisation figure").first
                    assert figure.locator("circle.point.partial").count() == 3
                    assert "20 Nov so far" in figure.locator("figcaption").inner_text()
                context.close()
        finally:
            connections.close_all()  # see the page fixture
