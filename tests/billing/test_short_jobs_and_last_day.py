"""A real Prometheus loaded with a known history: a 3-minute job is charged
for 3 minutes at the production step, a job released inside the hour is
metered, and the team page's last 24 hours are drawn per minute."""

import io
import json
import tempfile
from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command

from billing import actions, prometheus
from billing.models import IngestedHour, WorkloadUsage
from tests.billing import history
from tests.billing.history import H10, NODES, Device, Pod, at, constant
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

pytestmark = pytest.mark.prometheus

PODS = [
    # Three minutes of one H100, mid-hour.
    Pod(
        "vision",
        "quick-x7k2p",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(10, 31),
        at(10, 34),
        devices=[Device(0, constant(0.8))],
        owner=("Job", "quick"),
    ),
    # Released by a batch window at 10:45, still running at 11:00.
    Pod(
        "vision",
        "batch-7-q2m4d",
        "gpu-h100-0",
        "nvidia_com_gpu",
        2,
        at(10, 45),
        at(11, 30),
        devices=[Device(1, constant(0.6)), Device(2, constant(0.6))],
        owner=("Job", "batch-7"),
    ),
    # A notebook holding an A100 and doing nothing after its first ten minutes.
    Pod(
        "vision",
        "notebook",
        "gpu-a100-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(12, 0),
        devices=[Device(3, lambda i: 0.4 if i < 10 else 0.0)],
    ),
]


@pytest.fixture(scope="module")
def prometheus_url():
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-short-") as directory:
        load_openmetrics(history.openmetrics(NODES, PODS, at(9, 0), at(13, 0)), directory)
        with running_prometheus(directory) as url:
            yield url


@pytest.fixture
def metered(settings, prometheus_url, catalog, vision):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_STEP = 60  # the production default
    for hour in (H10, H10 + timedelta(hours=1)):
        actions.ingest_hour(hour)
    return catalog


def seconds(name, hour=H10):
    row = WorkloadUsage.objects.get(name=name, hour=hour)
    return row.allocated_seconds, row.active_seconds, row.idle_seconds


def test_a_three_minute_job_is_charged_three_minutes(metered):
    assert seconds("quick") == (180, 180, 0)


def test_a_job_released_inside_the_hour_is_metered_from_its_release(metered):
    # Two GPUs from 10:45 to 11:00, then to 11:30.
    assert seconds("batch-7") == (2 * 900, 2 * 900, 0)
    assert seconds("batch-7", H10 + timedelta(hours=1)) == (2 * 1800, 2 * 1800, 0)


def test_the_last_24_hours_per_minute(metered, client, alice):
    client.force_login(alice)
    with time_machine.travel(at(12, 30), tick=False):
        page = client.get("/billing/teams/vision/?view=24h").content.decode()
    picture = page[page.index('id="idle-picture"') : page.index('id="top-idle"')]
    assert "one cell per minute (Prometheus)" in picture
    # The notebook first (110 idle A100-minutes), named by the ledger's flavor.
    assert picture.index("Pod notebook") < picture.index("Job quick")
    assert "1 × A100 80GB" in picture
    assert "01 Nov" not in picture
    assert "02 Nov 10:31–02 Nov 10:34: 1 GPU, 80 % active, 0 of 0.1 GPU-hours idle" in picture
    assert "02 Nov 10:10–02 Nov 12:00: 1 GPU, 0 % active, 1.8 of 1.8 GPU-hours idle" in picture


def test_history_loaded_coarser_keeps_its_step_and_the_page_says_so(
    settings, prometheus_url, catalog, vision, client, alice
):
    """The demo loads a month sampled every 30 minutes, then scrapes every 15 s:
    its hours are metered at their own step, live hours at the production one."""
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_HISTORY_STEP = 1800
    settings.PORTAL_BILLING_HISTORY_END = H10 + timedelta(hours=1)
    for hour in (H10, H10 + timedelta(hours=1)):
        actions.ingest_hour(hour)
    assert list(IngestedHour.objects.order_by("hour").values_list("step", flat=True)) == [1800, 60]
    # Sampled at 10:00 and 10:30 only, the 3-minute job is not seen at all.
    assert not WorkloadUsage.objects.filter(name="quick").exists()
    client.force_login(alice)
    with time_machine.travel(at(12, 30), tick=False):
        page = client.get("/billing/teams/vision/?month=2026-11").content.decode()
    assert (
        "Figures per hour, from samples every 30 minutes until 02 Nov 11:00, every minute since"
        in page
    )


def test_the_grafana_dashboard_is_the_portals_promql_and_answers(settings, prometheus_url):
    """deploy/grafana/gpu-idle.json is what `grafana_dashboard` writes, and its
    panels, with their variables filled in, answer from the same history."""
    committed = json.loads((settings.BASE_DIR / "deploy/grafana/gpu-idle.json").read_text())
    out = io.StringIO()
    call_command("grafana_dashboard", stdout=out)
    assert json.loads(out.getvalue()) == committed
    variables = {
        "${namespace_label}": "namespace",
        "${pod_label}": "pod",
        "${namespace:regex}": "vision",
        "$idle_threshold": "0.05",
        "$__range": "4h",
        "$price_per_gpu_hour": "2.5",
    }
    answers = {}
    for panel in committed["panels"]:
        expr = panel["targets"][0]["expr"]
        for name, value in variables.items():
            expr = expr.replace(name, value)
        answers[panel["title"]] = prometheus.query(expr, at=at(12, 0), base_url=prometheus_url)
    idle_hours = {
        s.labels["pod"]: s.points[0][1] for s in answers["Idle GPU-hours over the range, by pod"]
    }
    # The notebook idled from 10:10 to 12:00; the busy jobs not at all.
    assert idle_hours["notebook"] == pytest.approx(110 / 60, abs=0.02)
    assert idle_hours["quick-x7k2p"] == 0
    cost = {s.labels["pod"]: s.points[0][1] for s in answers["Idle cost over the range, by pod"]}
    assert cost["notebook"] == pytest.approx(110 / 60 * 2.5, abs=0.05)


def test_admins_see_every_teams_last_24_hours(metered, client, admin_user, nlp):
    client.force_login(admin_user)
    with time_machine.travel(at(12, 30), tick=False):
        page = client.get("/billing/admin/?view=24h").content.decode()
    picture = page[page.index('id="cluster-picture"') : page.index('id="teams"')]
    assert "one cell per minute (Prometheus)" in picture
    assert picture.index("Pod notebook") < picture.index("Job quick")
    assert '<span class="muted">Vision</span>' in picture
