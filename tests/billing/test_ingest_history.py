"""A real Prometheus loaded with a known history (promtool); the ledger must
come out exactly as the history says."""

import tempfile
from datetime import timedelta
from decimal import Decimal

import pytest

from billing import actions, prometheus
from billing.models import FlavorHour, IngestedHour, Rate, TeamUsage, WorkloadUsage
from tests.billing import history
from tests.billing.history import H10, H11
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def prometheus_url():
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-prom-") as directory:
        load_openmetrics(history.scenario_text(), directory)
        with running_prometheus(directory) as url:
            yield url


@pytest.fixture
def metered(settings, prometheus_url, catalog, vision, nlp, alice, bob, admin_user, grant):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_STEP = 60
    settings.PORTAL_BATCH_SPOT_FACTOR = Decimal("0.4")
    grant(vision, catalog["h100"], 4, H10, H10 + timedelta(hours=2), alice)
    actions.add_rate(catalog["h100"], H11, price=Decimal("5.00"), by=admin_user)
    actions.add_rate(
        catalog["mig"],
        H10 - timedelta(days=30),
        mig_parent=catalog["a100"],
        mig_basis="compute",
        by=admin_user,
    )
    return catalog


def figures(row):
    return (row.allocated_seconds, row.active_seconds, row.idle_seconds, row.unmetered_seconds)


def team_rows(hour):
    return {
        (row.team.slug, row.flavor.slug): row
        for row in TeamUsage.objects.filter(hour=hour).select_related("team", "flavor")
    }


def test_it_meters_an_hour_exactly(metered, vision, nlp):
    assert actions.ingest_hour(H10) is True
    rows = team_rows(H10)
    assert set(rows) == {
        ("vision", "h100"),
        ("vision", "a100"),
        ("nlp", "a100-3g"),
        ("nlp", "t4-shared"),
        ("nlp", "l4"),
    }
    # 2 GPUs from 10:30: half the hour. gpu0 busy; gpu1 at exactly 5 % for 15
    # minutes (active), then 4 % (idle).
    assert figures(rows["vision", "h100"]) == (3600, 1800 + 900, 900, 0)
    assert rows["vision", "h100"].reserved_seconds == 4 * 3600
    assert rows["vision", "h100"].reserved_unallocated_seconds == 4 * 3600 - 3600
    # Idle all hour but ten minutes without samples: those are unmetered.
    assert figures(rows["vision", "a100"]) == (3600, 0, 3000, 600)
    # MIG: active by the profiling field (GPU_UTIL reads 0 there).
    assert figures(rows["nlp", "a100-3g"]) == (3600, 3600, 0, 0)
    # Two pods share one T4 for half an hour: two shares, each counted once.
    assert figures(rows["nlp", "t4-shared"]) == (3600, 3600, 0, 0)

    # Prices: catalog before the change at 11:00; MIG as 3/7 of the A100.
    assert rows["vision", "h100"].price == Decimal("4.0000")
    assert rows["nlp", "a100-3g"].price == Decimal("1.2000")


def test_the_next_hour_has_the_rest_of_the_pod_at_the_new_price(metered):
    actions.ingest_hour(H11)
    rows = team_rows(H11)
    h100 = rows["vision", "h100"]
    assert figures(h100) == (2 * 900, 900, 900, 0)
    assert h100.price == Decimal("5.0000")
    assert h100.reserved_unallocated_seconds == 4 * 3600 - 1800


def test_workloads_carry_activity_and_peak_memory(metered):
    actions.ingest_hour(H10)
    loads = {
        (row.namespace, row.kind, row.name): row for row in WorkloadUsage.objects.filter(hour=H10)
    }
    assert set(loads) == {
        ("vision", "Job", "train"),
        ("vision", "Pod", "notebook"),
        ("nlp", "Job", "mig-job"),
        ("nlp", "Job", "shared"),
        ("nlp", "Job", "eval"),
    }
    train = loads["vision", "Job", "train"]
    assert train.gpus == 2 and train.fb_peak_mib == 70000
    assert train.activity_mean == pytest.approx((30 * 0.9 + 15 * 0.05 + 15 * 0.04) / 60)
    notebook = loads["vision", "Pod", "notebook"]
    assert figures(notebook) == (3600, 0, 3000, 600)
    assert notebook.activity_mean == 0


def test_the_platform_line_accounts_for_every_gpu_hour(metered):
    actions.ingest_hour(H10)
    h100 = FlavorHour.objects.get(hour=H10, flavor__slug="h100")
    assert h100.capacity_seconds == 8 * 3600
    assert h100.other_allocated_seconds == 600  # kube-system's ten minutes
    assert (
        h100.team_allocated_seconds
        + h100.team_reserved_unallocated_seconds
        + h100.other_allocated_seconds
        + h100.batch_set_aside_unused_seconds
        + h100.unreserved_seconds
    ) == h100.capacity_seconds
    assert h100.unreserved_seconds == 8 * 3600 - 4 * 3600 - 600


def test_reingesting_changes_nothing(metered):
    assert actions.ingest_hour(H10) is True
    before = list(TeamUsage.objects.filter(hour=H10).order_by("pk").values())
    assert actions.ingest_hour(H10) is False
    assert list(TeamUsage.objects.filter(hour=H10).order_by("pk").values()) == before
    assert IngestedHour.objects.get(hour=H10).attempts == 2


def test_an_outage_leaves_the_hour_pending_then_fills_it(metered, settings, prometheus_url):
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens there
    with pytest.raises(prometheus.PrometheusUnavailable):
        actions.ingest_hour(H10)
    state = IngestedHour.objects.get(hour=H10)
    assert state.status == IngestedHour.Status.PENDING
    assert "unreachable" in state.last_error
    assert not TeamUsage.objects.filter(hour=H10).exists()

    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    # The beat's next run: the day before it was pending too (a fresh install).
    assert actions.ingest_closed_hours(now=H10 + timedelta(hours=1, minutes=11)) == 24
    assert IngestedHour.objects.get(hour=H10).status == IngestedHour.Status.DONE
    assert TeamUsage.objects.filter(hour=H10).count() == 5


def test_a_rate_added_later_reprices_the_hours_it_covers(metered, admin_user):
    actions.ingest_hour(H10)
    actions.add_rate(metered["h100"], H10, price=Decimal("4.50"), by=admin_user)
    assert TeamUsage.objects.get(hour=H10, flavor__slug="h100").price == Decimal("4.5000")
    assert Rate.objects.filter(flavor=metered["h100"]).count() == 2


def test_gpu_health_names_the_xid_the_drain_and_the_job_hit(metered, client, admin_user):
    from billing import health

    (event,) = health.xid_events(at=H11)
    assert (event["node"], event["gpu"], event["code"]) == ("gpu-a100-0", "3", 79)
    assert event["meaning"] == "GPU has fallen off the bus" and event["drain"] is True
    assert (event["namespace"], event["pod"]) == ("vision", "notebook")
    assert health.xid_events(at=H10) == []


def test_gpu_health_page_shows_it_to_admins_and_hides_other_teams_pods(
    metered, client, admin_user, bob
):
    import time_machine

    with time_machine.travel(H11 + timedelta(minutes=5), tick=False):
        client.force_login(admin_user)
        page = client.get("/billing/health/").content.decode()
        assert "GPU has fallen off the bus" in page and "kubectl drain gpu-a100-0" in page
        assert "vision/notebook" in page
        client.force_login(bob)
        page = client.get("/billing/health/").content.decode()
        assert "GPU has fallen off the bus" in page and "vision/notebook" not in page


def test_gpu_health_page_says_when_prometheus_cannot_answer(client, alice, settings):
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"
    client.force_login(alice)
    page = client.get("/billing/health/").content.decode()
    assert "Prometheus could not be asked" in page


def test_the_backfill_command_shows_progress_and_changes_nothing_the_second_time(metered):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "ingest_usage", "--from", "2026-11-02T10:00Z", "--to", "2026-11-02T12:00Z", stdout=out
    )
    text = out.getvalue()
    assert "[###############...............] 1/2 2026-11-02T10:00Z" in text
    assert "2 hours: 2 changed, 0 unchanged, 0 pending." in text
    out = io.StringIO()
    call_command(
        "ingest_usage", "--from", "2026-11-02T10:00Z", "--to", "2026-11-02T12:00Z", stdout=out
    )
    assert "2 hours: 0 changed, 2 unchanged, 0 pending." in out.getvalue()


@pytest.mark.parametrize(
    "start, end, message",
    [
        ("2026-11-02T10:30Z", "2026-11-02T12:00Z", "on the hour"),
        ("2026-11-02T10:00", "2026-11-02T12:00Z", "time zone"),
        ("yesterday", "2026-11-02T12:00Z", "not a date"),
        ("2026-11-02T12:00Z", "2026-11-02T10:00Z", "after --from"),
    ],
)
def test_the_backfill_command_refuses_bad_ranges(db, start, end, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=message):
        call_command("ingest_usage", "--from", start, "--to", end)


def test_the_report_card_shows_the_last_24_hours_per_minute(metered, client, alice):
    import time_machine

    actions.ingest_hour(H10)
    with time_machine.travel(H11 + timedelta(minutes=30), tick=False):
        client.force_login(alice)
        client.post("/preferences/", {"time_zone": "Asia/Tokyo"})
        page = client.get("/billing/teams/vision/workloads/vision/Job/train/").content.decode()
    recent = page[page.index('id="recent-picture"') :]
    assert "one cell per minute (Prometheus)" in recent
    # The hours of the day in the viewer's zone: 11:30 UTC a day back is 20:30 in Tokyo.
    assert ">20:30</text>" in recent
    # 10:30 to 11:15 UTC, both GPUs: 0.9 and 0.05, then 0.9 and 0.04 (idle) from 10:45.
    assert "02 Nov 19:30–02 Nov 20:15: 2 GPUs, 47.2 % active, 0.5 of 1.5 GPU-hours idle" in (recent)


def test_spot_time_is_priced_with_the_spot_factor_also_after_a_rate_change(metered, admin_user):
    actions.ingest_hour(H10)
    row = TeamUsage.objects.get(hour=H10, flavor__slug="l4")
    assert (row.allocated_seconds, row.spot_seconds) == (3600, 3600)
    assert row.price == Decimal("0.4000")  # 1.00 x 0.4
    assert TeamUsage.objects.get(hour=H10, flavor__slug="h100").spot_seconds == 0
    l4 = FlavorHour.objects.get(hour=H10, flavor__slug="l4")
    assert (l4.capacity_seconds, l4.spot_capacity_seconds, l4.price) == (7200, 7200, Decimal("0.4"))
    actions.add_rate(metered["l4"], H10, price=Decimal("2.00"), by=admin_user)
    assert TeamUsage.objects.get(hour=H10, flavor__slug="l4").price == Decimal("0.8000")
