"""GPU time lost to a spot reclaim or an XID failure is credited: a real
Prometheus loaded with a known history (promtool), the reclaimed pod named by
the batch app, the credit on the team page, in the API and in the CSV."""

import csv
import io
import tempfile
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest

from batch.models import BatchJob, ImageRule
from billing import actions, health
from billing.models import IngestedHour, LostRun, TeamUsage, WorkloadUsage
from tests.billing import history
from tests.billing.history import Device, Node, Pod
from tests.billing.lost_month import spot_sweep
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

pytestmark = pytest.mark.prometheus

DAY = datetime(2026, 11, 3, tzinfo=UTC)
H9, H10 = DAY.replace(hour=9), DAY.replace(hour=10)


def at(hour, minute):
    return DAY.replace(hour=hour, minute=minute)


def busy(index):
    return 0.9


def xid_at(minute, code):
    return lambda index: code if index >= minute else 0


NODES = [
    Node("gpu-h100-0", "NVIDIA-H100-80GB-HBM3", {"nvidia_com_gpu": 8}),
    Node(
        "gpu-l4-0",
        "NVIDIA-L4",
        {"nvidia_com_gpu": 2},
        labels={"label_karpenter_sh_capacity_type": "spot"},
    ),
]
# A batch pod on spot capacity from 09:40, reclaimed at 10:25: 45 GPU-minutes lost.
RECLAIMED = Pod(
    "vision",
    "sweep-4kq2z",
    "gpu-l4-0",
    "nvidia_com_gpu",
    1,
    at(9, 40),
    at(10, 25),
    devices=[Device(0, busy)],
    ends_as="Failed",
)
PODS = [
    RECLAIMED,
    # GPU 1 fell off the bus (XID 79) in the run's last minute: 2 x 30 minutes lost.
    Pod(
        "vision",
        "train-xid",
        "gpu-h100-0",
        "nvidia_com_gpu",
        2,
        at(10, 0),
        at(10, 30),
        devices=[Device(0, busy), Device(1, busy, xid=xid_at(29, 79))],
        owner=("Job", "train"),
        ends_as="Failed",
    ),
    # XID 13 is the application's own fault: not credited.
    Pod(
        "vision",
        "buggy",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(10, 20),
        devices=[Device(2, busy, xid=xid_at(19, 13))],
        ends_as="Failed",
    ),
    # Ended by itself: nothing to credit.
    Pod(
        "vision",
        "done",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(10, 10),
        devices=[Device(3, busy)],
    ),
]


@pytest.fixture(scope="module")
def prometheus_url():
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-lost-") as directory:
        load_openmetrics(history.openmetrics(NODES, PODS, H9, H10 + timedelta(hours=2)), directory)
        with running_prometheus(directory) as url:
            yield url


@pytest.fixture
def credited(settings, prometheus_url, catalog, vision, alice, admin_user):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_STEP = 60
    settings.PORTAL_BATCH_SPOT_FACTOR = Decimal("0.5")
    ImageRule.objects.create(prefix="nvcr.io/nvidia/")
    job = spot_sweep(
        catalog,
        vision,
        alice,
        admin_user,
        at=H9 - timedelta(hours=1),
        window=(time(20), time(22)),
        expected_minutes=60,
        max_minutes=90,
    )
    # What batch's watch writes when it sees the pod's DisruptionTarget
    # condition (batch.watch._details): here the history's pod is made up, so
    # its uid is written as the watch would; test_live_reclaim.py goes through
    # the watch itself against kubesim.
    BatchJob.objects.filter(pk=job.pk).update(disrupted_pods=[RECLAIMED.uid], lost_gpu_minutes=45)
    for hour in (H9, H10, H10 + timedelta(hours=1)):
        actions.ingest_hour(hour)
    return catalog


def row(hour, flavor):
    return TeamUsage.objects.get(team__slug="vision", hour=hour, flavor__slug=flavor)


def test_a_reclaimed_run_is_credited_whole_in_the_hours_it_ran(credited):
    # From its start (kube-state-metrics' kube_pod_start_time, 09:40) to 10:25,
    # found when 10:00 was metered: each hour is credited what it charged.
    assert row(H9, "l4").lost_seconds == row(H9, "l4").allocated_seconds == 20 * 60
    spot = row(H10, "l4")
    assert spot.allocated_seconds == spot.lost_seconds == 25 * 60
    (run,) = LostRun.objects.filter(cause=LostRun.Cause.RECLAIM)
    assert (run.pod, run.started, run.ended) == ("sweep-4kq2z", at(9, 40), at(10, 25))
    assert run.hour == H10


def test_an_xid_failure_is_credited_and_an_application_xid_is_not(credited):
    h100 = row(H10, "h100")
    assert h100.allocated_seconds == 2 * 30 * 60 + 20 * 60 + 10 * 60
    assert h100.lost_seconds == 2 * 30 * 60  # train-xid only


def test_the_credit_comes_off_the_spend_on_the_page_the_api_and_the_csv(credited, client, alice):
    client.force_login(alice)
    page = client.get("/billing/teams/vision/?month=2026-11").content.decode()
    # H100: 90 GPU-minutes at 4.00 = 6.00, 60 of them credited (4.00).
    # L4 (spot, 0.5 x 1.00): 45 GPU-minutes, all credited (0.375).
    assert 'id="credit">4.38 USD' in page
    assert "for 1.8 GPU-hours lost" in page
    assert 'id="spend">2.00 USD' in page

    api = client.get("/api/v1/billing/usage/", {"team": "vision", "group_by": "flavor"}).json()
    by_flavor = {r["flavor"]: r for r in api["results"]}
    assert by_flavor["h100"]["lost_gpu_hours"] == "1.0000"
    assert by_flavor["h100"]["credit"] == "4.00"
    assert by_flavor["h100"]["cost"] == "2.00"
    assert by_flavor["l4"]["lost_gpu_hours"] == "0.7500"
    assert by_flavor["l4"]["cost"] == "0.00"

    export = client.get("/billing/teams/vision/", {"month": "2026-11", "export": "flavors"})
    rows = {r["flavor__slug"]: r for r in csv.DictReader(io.StringIO(export.content.decode()))}
    assert Decimal(rows["h100"]["lost_gpu_hours"]) == 1
    assert Decimal(rows["h100"]["credit"]) == 4


def test_the_admin_table_shows_each_teams_credit(credited, client, admin_user):
    client.force_login(admin_user)
    page = client.get("/billing/admin/", {"month": "2026-11", "sort": "credit"})
    assert page.status_code == 200
    assert "Credit (lost GPU time)" in page.content.decode()
    assert '<td class="num">4.38 USD</td>' in page.content.decode()


def test_the_hostname_label_is_a_setting(settings, catalog, vision):
    """The exporter's main branch writes `hostname`: with the setting, the XID's
    node is known (GPU health) and the run it killed is still credited."""
    require_prometheus()
    settings.PORTAL_BILLING_STEP = 60
    text = history.openmetrics(NODES, PODS[1:2], H9, H10 + timedelta(hours=1), "hostname")
    with tempfile.TemporaryDirectory(prefix="billing-hostname-") as directory:
        load_openmetrics(text, directory)
        with running_prometheus(directory) as url:
            settings.PORTAL_PROMETHEUS_URL = url
            (unnamed,) = health.xid_events(at=H10 + timedelta(hours=1))
            settings.PORTAL_BILLING_LABEL_HOSTNAME = "hostname"
            (named,) = health.xid_events(at=H10 + timedelta(hours=1))
            actions.ingest_hour(H10)
    assert (unnamed["node"], named["node"]) == ("", "gpu-h100-0")
    assert named["pod"] == "train-xid" and named["code"] == 79
    assert row(H10, "h100").lost_seconds == 2 * 30 * 60


def test_an_xid_at_the_first_sample_of_the_pods_last_hour_is_credited(settings, catalog, vision):
    """The pod ran from 09:30 and was last seen running at 10:00, the hour's first
    sample, which is also where its GPU first shows XID 79: the XID is new (the GPU
    read 0 at 09:59), so the run is lost and credited from its start."""
    require_prometheus()
    settings.PORTAL_BILLING_STEP = 60
    hit = Pod(
        "vision",
        "train-early",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(9, 30),
        at(10, 1),
        devices=[Device(4, busy, xid=xid_at(30, 79))],
        owner=("Job", "train"),
        ends_as="Failed",
    )
    text = history.openmetrics(NODES, [hit], H9, H10 + timedelta(hours=1))
    with tempfile.TemporaryDirectory(prefix="billing-xid-first-") as directory:
        load_openmetrics(text, directory)
        with running_prometheus(directory) as url:
            settings.PORTAL_PROMETHEUS_URL = url
            actions.ingest_hour(H9)
            actions.ingest_hour(H10)
    # 09:30 to the end of its 10:00 step, in the hours it ran.
    assert row(H9, "h100").lost_seconds == 30 * 60
    last = row(H10, "h100")
    assert last.allocated_seconds == last.lost_seconds == 60


def test_re_metering_either_hour_keeps_the_credit_once(credited):
    """The hour a run ran in and the hour it was found lost in can be metered
    again, in any order: the credit stays where it was, once."""
    before = {(r.hour, r.flavor_id): r.lost_seconds for r in TeamUsage.objects.all()}
    for hour in (H9, H10, H9):
        # A changed digest forces the rows to be written again.
        IngestedHour.objects.filter(hour=hour).update(digest="")
        actions.ingest_hour(hour)
    after = {(r.hour, r.flavor_id): r.lost_seconds for r in TeamUsage.objects.all()}
    assert after == before
    assert LostRun.objects.count() == 2
    workloads = WorkloadUsage.objects.filter(lost_seconds__gt=0)
    assert sum(w.lost_seconds for w in workloads) == 45 * 60 + 2 * 30 * 60
