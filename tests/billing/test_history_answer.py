"""The ledger against kubesim's exact answer: `python -m kubesim history` writes a
period of kube-state-metrics and DCGM series (as the documented scrape config
stores them) and, beside it, what each pod held, busy, idle and unobserved per
hour; promtool loads it into a real Prometheus; billing meters it."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from billing import actions
from billing.models import TeamUsage, WorkloadUsage
from cluster.models import Flavor
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus
from tests.factories import FlavorFactory

pytestmark = pytest.mark.prometheus

FROM = datetime(2026, 11, 15, 9, tzinfo=UTC)
TO = datetime(2026, 11, 15, 14, tzinfo=UTC)
PRICE_CHANGE = datetime(2026, 11, 15, 12, tzinfo=UTC)
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
T4 = {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}  # GFD renames time-sliced GPUs

CLUSTER = {
    "name": "billing",
    "nodePools": [
        {
            "name": "h100",
            "namePrefix": "gpu-h100",
            "count": 1,
            "gpu": {"model": "H100-80GB-HBM3", "count": 4},
        },
        {
            "name": "a100-mig",
            "namePrefix": "gpu-mig",
            "count": 1,
            "gpu": {
                "model": "A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "config": "all-1g.10gb"},
            },
        },
        {
            "name": "t4",
            "namePrefix": "gpu-t4",
            "count": 1,
            "gpu": {"model": "T4", "count": 1, "replicas": 4},
        },
    ],
}

WORKLOAD = {
    "threshold": 0.05,
    "namespaces": [{"name": "vision", "team": "vision"}, {"name": "nlp", "team": "nlp"}],
    "workloads": [
        # Crosses 10:00 and 11:00: from 09:30 for 90 minutes on 2 H100s.
        {
            "namespace": "vision",
            "name": "train",
            "kind": "Job",
            "gpus": 2,
            "nodeSelector": H100,
            "start": "+30m",
            "duration": "90m",
            "profile": "constant",
            "util": 80,
            "fbUsed": 30000,
        },
        # An idle stretch exactly at the threshold: 5 % counts as active.
        {
            "namespace": "vision",
            "name": "notebook",
            "gpus": 1,
            "nodeSelector": H100,
            "start": "+0m",
            "duration": "4h",
            "profile": "constant",
            "util": 5,
        },
        # A MIG slice, busy for an hour, then idle.
        {
            "namespace": "nlp",
            "name": "finetune",
            "kind": "Job",
            "resource": "nvidia.com/mig-1g.10gb",
            "start": "+0m",
            "duration": "4h",
            "profile": "idle-after",
            "util": 60,
            "idleAfter": "1h",
        },
        # Two pods time-slicing one T4.
        {
            "namespace": "nlp",
            "name": "serve-a",
            "gpus": 1,
            "nodeSelector": T4,
            "start": "+1h",
            "duration": "2h",
            "profile": "constant",
            "util": 40,
        },
        {
            "namespace": "nlp",
            "name": "serve-b",
            "gpus": 1,
            "nodeSelector": T4,
            "start": "+1h",
            "duration": "2h",
            "profile": "idle",
        },
    ],
    # The H100 node's exporter was down for ten minutes: unobserved, not idle.
    # Later kube-state-metrics was down for ten minutes: the pods still held
    # their GPUs (the exporter says so), unmetered, never lost.
    "scrapeGaps": [
        {"from": "+40m", "to": "+50m", "job": "dcgm", "node": "gpu-h100-0"},
        {"from": "+2h10m", "to": "+2h20m", "job": "kube-state-metrics"},
    ],
}


@pytest.fixture(scope="module")
def generated():
    with generated_history() as found:
        yield found


@contextlib.contextmanager
def generated_history(*extra):
    """(Prometheus URL, exact answer) of the period; `extra`: more arguments for
    `kubesim history` (`--metrics REGEX` to leave families out)."""
    require_prometheus()
    with tempfile.TemporaryDirectory(prefix="billing-history-") as directory:
        folder = Path(directory)
        (folder / "cluster.yaml").write_text(yaml.safe_dump(CLUSTER))
        (folder / "workload.yaml").write_text(yaml.safe_dump(WORKLOAD))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kubesim",
                "history",
                "--cluster",
                str(folder / "cluster.yaml"),
                "--workload",
                str(folder / "workload.yaml"),
                "--from",
                FROM.isoformat(),
                "--to",
                TO.isoformat(),
                "--out",
                str(folder / "history.om"),
                "--answer",
                str(folder / "answer.json"),
                *extra,
            ],
            check=True,
            capture_output=True,
            timeout=600,
            cwd=os.environ.get("TRY_KUBESIM_DIR"),
        )
        answer = json.loads((folder / "answer.json").read_text())
        load_openmetrics((folder / "history.om").read_text(), directory)
        with running_prometheus(directory) as url:
            yield url, answer


@pytest.fixture
def ledger(generated, settings, vision, nlp, admin_user):
    url, answer = generated
    settings.PORTAL_PROMETHEUS_URL = url
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    h100 = FlavorFactory(
        slug="h100",
        name="H100",
        gpu_model="NVIDIA-H100-80GB-HBM3",
        price_per_gpu_hour=Decimal("4.0000"),
    )
    FlavorFactory(
        slug="mig-1g",
        name="MIG 1g.10gb",
        memory_gb=10,
        sharing=Flavor.Sharing.MIG,
        resource_name="nvidia.com/mig-1g.10gb",
        node_selector={},
        price_per_gpu_hour=Decimal("0.6000"),
    )
    FlavorFactory(
        slug="t4-shared",
        name="T4 shared",
        gpu_model="Tesla-T4-SHARED",
        memory_gb=16,
        sharing=Flavor.Sharing.TIME_SLICED,
        price_per_gpu_hour=Decimal("0.1000"),
    )
    actions.add_rate(h100, PRICE_CHANGE, price=Decimal("5.00"), by=admin_user)
    hour = FROM
    while hour < TO:
        actions.ingest_hour(hour)
        hour += timedelta(hours=1)
    return answer


def expected_by_workload(answer):
    """{(namespace, kind, name, hour): [gpu, busy, idle, unobserved seconds, peak fb, means]}"""
    expected = defaultdict(lambda: [0, 0, 0, 0, None, []])
    for row in answer["rows"]:
        kind, name = ("Job", row["job"]) if row["job"] else ("Pod", row["pod"])
        hour = datetime.fromisoformat(row["hour"].replace("Z", "+00:00"))
        figures = expected[(row["namespace"], kind, name, hour)]
        for index, key in enumerate(
            ("gpu_minutes", "busy_gpu_minutes", "idle_gpu_minutes", "unobserved_gpu_minutes")
        ):
            figures[index] += row[key] * 60
        if row["peak_fb_used_mib"] is not None:
            figures[4] = max(figures[4] or 0, row["peak_fb_used_mib"])
        if row["mean_utilisation"] is not None:
            figures[5].append(row["mean_utilisation"])
    return expected


def test_every_workload_hour_matches_the_exact_answer(ledger):
    expected = expected_by_workload(ledger)
    assert len(expected) == 14
    found = {
        (row.namespace, row.kind, row.name, row.hour): row for row in WorkloadUsage.objects.all()
    }
    assert set(found) == set(expected)
    for key, (gpu, busy, idle, unobserved, fb_peak, means) in expected.items():
        row = found[key]
        figures = (
            row.allocated_seconds,
            row.active_seconds,
            row.idle_seconds,
            row.unmetered_seconds,
        )
        assert figures == (gpu, busy, idle, unobserved), key
        assert row.fb_peak_mib == fb_peak, key
        if len(means) == 1:
            assert row.activity_mean == pytest.approx(means[0], abs=1e-6), key


def test_the_cases_the_answer_covers(ledger):
    rows = {(r.name, r.hour.hour): r for r in WorkloadUsage.objects.all()}
    # Crossing hours: 30 + 60 minutes on 2 GPUs.
    assert rows["train", 9].allocated_seconds == 2 * 30 * 60
    assert rows["train", 10].allocated_seconds == 2 * 60 * 60
    # At exactly 5 %: active (apart from the scrape gap, unmetered).
    notebook = rows["notebook", 9]
    assert notebook.idle_seconds == 0 and notebook.unmetered_seconds == 10 * 60
    assert notebook.active_seconds == 50 * 60
    # MIG: busy its first hour, idle after.
    assert rows["finetune", 9].active_seconds == 3600 and rows["finetune", 10].idle_seconds == 3600
    # Time-sliced: two pods on one T4, each share counted once.
    assert rows["serve-a", 10].active_seconds == 3600
    assert rows["serve-b", 10].allocated_seconds == 3600


def test_a_kube_state_metrics_gap_is_unmetered_not_lost(ledger):
    rows = {(r.name, r.hour.hour): r for r in WorkloadUsage.objects.all()}
    # 11:10-11:20 without kube-state-metrics: each pod running then keeps its
    # whole hour, ten minutes of it (per GPU) unmetered.
    for name in ("notebook", "finetune", "serve-a", "serve-b"):
        row = rows[name, 11]
        assert row.allocated_seconds == 3600, name
        assert row.unmetered_seconds == 600, name
        assert row.active_seconds + row.idle_seconds == 3000, name
    team = TeamUsage.objects.get(team__slug="nlp", flavor__slug="t4-shared", hour__hour=11)
    assert (team.allocated_seconds, team.unmetered_seconds) == (2 * 3600, 2 * 600)


def test_a_price_change_at_noon_prices_the_hours_either_side(ledger):
    prices = dict(
        TeamUsage.objects.filter(team__slug="vision", flavor__slug="h100").values_list(
            "hour__hour", "price"
        )
    )
    assert prices[11] == Decimal("4.0000") and prices[12] == Decimal("5.0000")


def test_reingesting_the_period_changes_nothing(ledger):
    before = list(TeamUsage.objects.order_by("pk").values())
    hour = FROM
    while hour < TO:
        assert actions.ingest_hour(hour) is False
        hour += timedelta(hours=1)
    assert list(TeamUsage.objects.order_by("pk").values()) == before
