"""The GPU health page with the demo's history in a real Prometheus, in headless
Chromium at 390 and 1440 px, light and dark: the last day's XIDs, and no table
cut off. Screenshots in /tmp/shots/."""

import sys

import pytest
from django.db import connections

from billing import demo
from tests.billing.promserver import require_prometheus, running_prometheus
from tests.web.test_browser_journey import browser, log_in, shot  # noqa: F401
from tests.web.test_browser_pages import overflowing_tables

pytestmark = [pytest.mark.browser, pytest.mark.prometheus]

SIZES = {"phone": (390, 844), "laptop": (1440, 900)}


def test_the_demo_gives_the_gpu_health_page_something_true_to_show(
    transactional_db,
    browser,  # noqa: F811
    live_server,
    tmp_path,
    settings,
    admin_user,
):
    require_prometheus()
    demo.load_history(sys.executable, tmp_path, tmp_path / "data", days=1, progress=print)
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    cut_off = {}
    with running_prometheus(tmp_path) as url:
        settings.PORTAL_PROMETHEUS_URL = url
        context = browser.new_context(base_url=live_server.url)
        try:
            tab = context.new_page()
            tab.set_default_timeout(10_000)
            log_in(tab, "admin")
            tab.goto("/billing/health/")
            for scheme in ("light", "dark"):
                tab.emulate_media(color_scheme=scheme)
                for size, (width, height) in SIZES.items():
                    tab.set_viewport_size({"width": width, "height": height})
                    wide = overflowing_tables(tab)
                    if wide and (width > 1000 or not all(t["hinted"] for t in wide)):
                        cut_off[size] = wide
                    shot(tab, f"gpu_health_demo_{size}_{scheme}")
            rows = tab.locator("#xid tbody").inner_text()
        finally:
            context.close()
            connections.close_all()  # see the page fixture in tests/web/test_browser_journey.py
    assert cut_off == {}
    assert "gpu-a100-0" in rows and "GPU has fallen off the bus" in rows
    assert "Drain the node" in rows
    assert "gpu-h100-0" in rows and "Graphics engine exception" in rows
    # One row per XID: not once with the pod it hit and again without, after the pod
    # went. (The window holds one or two of the plan's engine exceptions, by the hour.)
    cells = [line.split("\t") for line in rows.splitlines()]
    engine = [(node, gpu, when) for node, gpu, xid, *_, when in cells if xid == "13"]
    assert len(engine) == len(set(engine)) >= 1, rows
    assert all(pod != "–" for *_, xid, _, _, pod, _ in cells if xid == "13"), rows
