"""The demo walk behind docs/screenshots/demo_*.png: `make demo` in a fresh clone
(../shared/tools/demo-soak runs one on port 8650), then
`.venv/bin/python docs/screenshots/demo_walk.py http://127.0.0.1:8650 OUT_DIR`
walks it as admin and alice, light and dark, 1440 and 390 px: a screenshot per
page, and every answer that is not a 200, page that scrolls sideways or console
error printed (last run, 2026-12-07: none)."""

import sys

from playwright.sync_api import sync_playwright

PAGES = {
    "admin": [
        ("dashboard", "/"),
        ("review_queue", "/review/"),
        ("cluster", "/cluster/"),
        ("spend_admin", "/billing/admin/"),
        ("fleet_cost", "/billing/fleet/"),
        ("idle_policies", "/idle/policies/"),
        ("batch", "/batch/"),
    ],
    "alice": [
        ("dashboard_member", "/"),
        ("team_vision", "/teams/vision/"),
        ("spend_vision", "/billing/teams/vision/"),
        ("idle_notebook_card", "/billing/teams/vision/workloads/vision/Deployment/notebook/"),
        ("requests", "/requests/"),
        ("new_request", "/requests/new/"),
    ],
}
SCROLLS = "document.documentElement.scrollWidth > window.innerWidth"


def walk(browser, base, out, user, scheme, width):
    """The user's pages in one browser context: what was wrong, as lines."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")
    problems = []
    for name, path in PAGES[user]:
        response = page.goto(base + path)
        page.wait_for_load_state("networkidle")
        status = response.status if response else 0
        if status != 200 or page.evaluate(SCROLLS):
            problems.append(f"{user} {path} {scheme} {width}: {status}, or it scrolls sideways")
        page.screenshot(path=f"{out}/demo_{name}_{width}_{scheme}.png", full_page=True)
    context.close()
    return problems + [f"{user} {scheme} {width} console: {error}" for error in errors]


def main(base, out):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        problems = [
            line
            for user in PAGES
            for scheme in ("light", "dark")
            for width in (1440, 390)
            for line in walk(browser, base, out, user, scheme, width)
        ]
        browser.close()
    print("\n".join(problems) or "no problems")


if __name__ == "__main__":
    main(*sys.argv[1:3])
