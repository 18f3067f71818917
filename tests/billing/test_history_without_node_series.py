"""The exact answer again, with kube-state-metrics scraped without its node
families (a --metric-allowlist or --resources that leaves nodes out, common in
small set-ups): issue 17 found every allocated GPU-hour counted once from the
pods' requests and once more as "unmetered", every step looking like a
kube-state-metrics gap. A pod kube-state-metrics lists is never counted twice."""

from datetime import timedelta
from decimal import Decimal

import pytest

from billing import actions
from billing.models import TeamUsage, WorkloadUsage
from cluster.models import Flavor
from tests.billing.test_history_answer import (
    FROM,
    TO,
    expected_by_workload,
    generated_history,
)
from tests.factories import FlavorFactory

pytestmark = pytest.mark.prometheus

# Every family but kube_node_* (labels and allocatable).
WITHOUT_NODES = "(?!kube_node_).*"
# Pods of the time-sliced T4 (the same resource name as the H100's): without the
# nodes' labels nothing tells them from the H100 flavor's.
TIME_SLICED = {"serve-a", "serve-b"}


@pytest.fixture(scope="module")
def generated():
    with generated_history("--metrics", WITHOUT_NODES) as found:
        yield found


@pytest.fixture
def ledger(generated, settings, vision, nlp):
    url, answer = generated
    settings.PORTAL_PROMETHEUS_URL = url
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    FlavorFactory(
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
    hour = FROM
    while hour < TO:
        actions.ingest_hour(hour)
        hour += timedelta(hours=1)
    return answer


def test_every_workload_hour_still_matches_the_exact_answer(ledger):
    expected = expected_by_workload(ledger)
    found = {
        (row.namespace, row.kind, row.name, row.hour): row for row in WorkloadUsage.objects.all()
    }
    assert set(found) == set(expected)
    for key, (gpu, busy, idle, unobserved, _, _) in expected.items():
        row = found[key]
        # Held once: allocated is what the pod held, never twice that.
        assert row.allocated_seconds == gpu, key
        assert row.unmetered_seconds == unobserved, key
        if key[2] not in TIME_SLICED:
            assert (row.active_seconds, row.idle_seconds) == (busy, idle), key


def test_the_kube_state_metrics_gap_is_still_the_only_unmetered_time(ledger):
    rows = {(r.name, r.hour.hour): r for r in WorkloadUsage.objects.all()}
    assert rows["notebook", 11].unmetered_seconds == 600
    assert rows["notebook", 10].unmetered_seconds == 0
    total = sum(TeamUsage.objects.values_list("allocated_seconds", flat=True))
    assert total == sum(row["gpu_minutes"] * 60 for row in ledger["rows"])
