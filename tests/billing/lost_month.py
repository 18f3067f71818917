"""A past month with a spot reclaim and an XID failure, metered from a real
Prometheus (promtool) through `ingest_hour`, and a current month written by
hand: the month the figures-agree tests read.

November 2026, the vision team:

- `sweep-idle` (a batch Job's pod on a spot L4, 0.5 x 1.00 a GPU-hour) runs
  3 Nov 22:30 to 4 Nov 01:30, idle its first two hours, and is reclaimed:
  3 GPU-hours lost, 2 of them idle.
- `train` (a Job, 2 H100s at 4.00) runs 3 Nov 23:00 to 23:30, busy; GPU 1
  falls off the bus (XID 79) in its last minute: 1 GPU-hour lost.
- `notebook` (a bare pod, 1 H100) idles 3 Nov 22:00 to 23:00: idle, not lost.

December 2026 (the current month, read on 10 Dec): a Job `eval` idle half
of two H100-hours on 9 Dec.
"""

import tempfile
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest
import time_machine

from batch import actions as batch_actions
from batch.models import BatchJob, ImageRule
from billing import actions
from tests.billing import history
from tests.billing.history import Device, Node, Pod
from tests.billing.ledger import meter, workload
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

NOW = datetime(2026, 12, 10, 12, tzinfo=UTC)
NOV3 = datetime(2026, 11, 3, tzinfo=UTC)
HOURS = [NOV3.replace(hour=22) + timedelta(hours=n) for n in range(4)]  # 3 Nov 22:00 - 4 Nov 02:00
DEC9 = datetime(2026, 12, 9, 9, tzinfo=UTC)


def at(day, hour, minute=0):
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


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
RECLAIMED = Pod(
    "vision",
    "sweep-idle",
    "gpu-l4-0",
    "nvidia_com_gpu",
    1,
    at(3, 22, 30),
    at(4, 1, 30),
    devices=[Device(0, lambda i: 0.01 if i < 120 else 0.9)],
    owner=("Job", "sweep-idle"),
    ends_as="Failed",
)
PODS = [
    RECLAIMED,
    Pod(
        "vision",
        "train-x2",
        "gpu-h100-0",
        "nvidia_com_gpu",
        2,
        at(3, 23),
        at(3, 23, 30),
        devices=[Device(0, lambda i: 0.9), Device(1, lambda i: 0.9, xid=xid_at(29, 79))],
        owner=("Job", "train"),
        ends_as="Failed",
    ),
    Pod(
        "vision",
        "notebook",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(3, 22),
        at(3, 23),
        devices=[Device(2, lambda i: 0.0)],
    ),
]


@pytest.fixture(scope="module")
def prometheus_url():
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-figures-") as directory:
        start, end = HOURS[0] - timedelta(hours=1), HOURS[-1] + timedelta(hours=2)
        text = history.openmetrics(NODES, PODS, start, end)
        load_openmetrics(text, directory)
        with running_prometheus(directory) as url:
            yield url


def spot_sweep(catalog, team, alice, admin_user, *, at, window, expected_minutes, max_minutes):
    """Vision's one-GPU L4 sweep that may run on spot, in a daily window of its own
    (`window`: start and end times, UTC), submitted at `at`."""
    with time_machine.travel(at, tick=False):
        batch_actions.save_window(
            None,
            by=admin_user,
            capacity={catalog["l4"]: 2},
            name="Spot sweeps",
            timezone="UTC",
            days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            start_time=window[0],
            end_time=window[1],
            exceptions=[],
            price_factor="1",
            spot_allowed=True,
        )
        return batch_actions.submit(
            by=alice,
            team=team,
            flavor=catalog["l4"],
            name="sweep",
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            command=["python"],
            args=[],
            env=[],
            gpus=1,
            parallelism=1,
            completions=1,
            expected_runtime_minutes=expected_minutes,
            max_runtime_minutes=max_minutes,
            spot_allowed=True,
            priority=0,
        )


@pytest.fixture
def lost_month(settings, prometheus_url, catalog, vision, alice, admin_user):
    """November metered from Prometheus, December by hand; the clock on 10 Dec."""
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_STEP = 60
    settings.PORTAL_BATCH_SPOT_FACTOR = Decimal("0.5")
    ImageRule.objects.create(prefix="nvcr.io/nvidia/")
    job = spot_sweep(
        catalog,
        vision,
        alice,
        admin_user,
        at=HOURS[0] - timedelta(hours=2),
        window=(time(1), time(7)),
        expected_minutes=240,
        max_minutes=300,
    )
    # What batch's watch records on the pod's DisruptionTarget condition
    # (test_live_reclaim.py goes through the watch itself).
    BatchJob.objects.filter(pk=job.pk).update(disrupted_pods=[RECLAIMED.uid])
    for hour in HOURS:
        actions.ingest_hour(hour)
    h100 = catalog["h100"]
    meter(
        DEC9,
        teams={(vision, h100): (2 * 3600, 3600, 3600, 0)},
        workloads={(vision, "vision", "Job", "eval", h100): workload(2 * 3600, 3600, 3600)},
    )
    with time_machine.travel(NOW, tick=False):
        yield catalog
