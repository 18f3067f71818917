"""The GPU health page's span: XIDs of the last day, week (the default) or month,
from a real Prometheus loaded with a month of exporter samples, each with when the
GPU last reported it."""

import tempfile
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from tests.billing import history
from tests.billing.history import Device, Node, Pod
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

pytestmark = pytest.mark.prometheus

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NODES = [Node("gpu-h100-0", "NVIDIA-H100-80GB-HBM3", {"nvidia_com_gpu": 8})]


def hit(name, ago, gpu, code):
    """A 30-minute pod whose GPU reports `code` from its 20th minute."""
    start = NOW - ago
    return Pod(
        "vision",
        name,
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        start,
        start + timedelta(minutes=30),
        devices=[Device(gpu, lambda i: 0.9, xid=lambda i, code=code: code if i >= 20 else 0)],
        ends_as="Failed",
    )


PODS = [
    hit("app-fault", timedelta(hours=10), 1, 13),
    hit("off-the-bus", timedelta(days=3), 2, 79),
    hit("ecc", timedelta(days=20), 3, 48),
]


def _each_pod_alone():
    """The pods' samples around their own half hours only: a month of minutes
    for the few series the page reads would take promtool a minute to load."""
    families = {}
    for pod in PODS:
        text = history.openmetrics([], [pod], pod.start, pod.end + timedelta(minutes=5))
        metric = None
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                metric = line.split()[2]
                families.setdefault(metric, [line])
            elif line != "# EOF":
                families[metric].append(line)
    return "\n".join(line for lines in families.values() for line in lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus_url():
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-health-") as directory:
        load_openmetrics(_each_pod_alone(), directory)
        with running_prometheus(directory) as url:
            yield url


@pytest.fixture
def page(settings, prometheus_url, client, admin_user):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    client.force_login(admin_user)

    def get(at=NOW, **params):
        with time_machine.travel(at, tick=False):
            response = client.get("/billing/health/", params)
        assert response.status_code == 200
        html = response.content.decode()
        return html, html.split('id="xid"')[1].split("</tbody>")[0]

    return get


def test_it_shows_the_last_week_by_default(page):
    html, rows = page()
    assert "XID errors in the last 7 days" in html
    assert '<strong aria-current="page">7 days</strong>' in html
    assert "vision/app-fault" in rows and "vision/off-the-bus" in rows
    assert "vision/ecc" not in rows  # 20 days ago


def test_it_shows_the_last_day(page):
    html, rows = page(days="1")
    assert "XID errors in the last 24 hours" in html
    assert "vision/app-fault" in rows
    assert "vision/off-the-bus" not in rows and "vision/ecc" not in rows


def test_it_shows_the_last_month_with_when_each_happened(page):
    html, rows = page(days="30")
    assert "XID errors in the last 30 days" in html
    assert "vision/ecc" in rows and "Double-bit ECC error" in rows
    # The pod started 20 days ago at 12:00; its GPU reported XID 48 from 12:20.
    ecc = rows.split("vision/ecc")[1].split("</tr>")[0]
    assert "Tue 10 Nov 12:20 UTC" in ecc


def test_an_xid_older_than_the_span_says_so(page):
    """A day and 25 minutes after XID 79 (Fri 27 Nov 12:20), the GPU still reported it
    in the day's first minutes: listed, as having happened before the span."""
    _, rows = page(at=datetime(2026, 11, 28, 12, 25, tzinfo=UTC), days="1")
    off = rows.split("vision/off-the-bus")[1].split("</tr>")[0]
    assert "before Fri 27 Nov 12:25 UTC" in off


def test_an_unknown_span_is_the_default(page):
    html, _ = page(days="365")
    assert "XID errors in the last 7 days" in html


def test_a_span_without_xids_says_so(page):
    _, rows = page(at=NOW + timedelta(days=2), days="1")
    assert "No XID errors in the last 24 hours." in rows
