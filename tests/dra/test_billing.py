"""Showback of DRA devices on the real control plane (v1.37.2): the real
scheduler allocates two claims, an H100 and a MIG 1g.10gb, the inventory records
which pod holds which device, the control plane's DCGM exporter puts the pods on
those devices, a real Prometheus scrapes it and the real kube-state-metrics, and
billing meters both pods onto the team and the flavors, the MIG slice at 1/7 of
the H100's price (the rate card's compute fraction, from the DRA flavor's
profile)."""

import tempfile
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from batch import actions as batch_actions
from batch import launch, manifests
from billing import actions, prometheus
from billing.models import TeamUsage, WorkloadUsage
from cluster import actions as cluster_actions
from cluster.inventory import exporter_device
from cluster.models import DraAllocation
from tests.batch.test_cluster import submit
from tests.billing.promserver import require_prometheus, running_prometheus
from tests.dra import objects
from tests.dra.test_batch import dra_setup, spot_allowed  # noqa: F401 (fixtures)
from tests.dra.test_cluster import (  # noqa: F401 (fixture)
    REAL,
    allocation,
    dra_flavor,
    namespace,
    pod_with_claim,
    published,
)
from tests.waiting import wait_for

MIG_1G = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'

pytestmark = [REAL, pytest.mark.prometheus]


def metered_by(settings, directory, backend):
    settings.PORTAL_BILLING_STEP = 1
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    return running_prometheus(directory, scrape=backend.scrape_configs(directory))


def ingest_since(started):
    for hour in {actions.hour_floor(started), actions.hour_floor(timezone.now())}:
        actions.ingest_hour(hour)


def test_dra_pods_are_metered_from_their_claims_allocations(
    settings,
    client,
    alice,
    vision,
    admin_user,
    backend,
    cluster,
    published,  # noqa: F811
):
    require_prometheus()
    started = timezone.now()
    h100 = dra_flavor("h100-dra", selector=objects.H100_ONLY)
    mig = dra_flavor("mig-dra", device_class="mig.nvidia.com", selector=MIG_1G)
    actions.add_rate(
        mig,
        actions.hour_floor(started) - timedelta(hours=1),
        by=admin_user,
        mig_parent=h100,
        mig_basis="compute",
    )
    settings.PORTAL_BILLING_STEP = 1
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    namespace(cluster, "vision")
    cluster.apply(objects.claim("big", "vision", selector=objects.H100_ONLY), field_manager="tests")
    cluster.apply(
        objects.claim("slice", "vision", device_class_name="mig.nvidia.com", selector=MIG_1G),
        field_manager="tests",
    )
    for name, claim, profile in (("train", "big", "idle"), ("notebook", "slice", "busy")):
        pod = pod_with_claim(name, "vision", claim)
        pod["metadata"]["annotations"] = {"kubesim.io/gpu-profile": profile}
        cluster.apply(pod, field_manager="tests")
    for claim in ("big", "slice"):
        wait_for(lambda claim=claim: allocation(cluster, claim, "vision"), timeout=60)

    cluster_actions.record_inventory()
    held = {
        (row.pod, row.flavor.slug, row.node)
        for row in DraAllocation.objects.select_related("flavor")
    }
    assert held == {("train", "h100-dra", "cpu-0"), ("notebook", "mig-dra", "cpu-1")}

    with (
        tempfile.TemporaryDirectory(prefix="billing-dra-") as directory,
        running_prometheus(directory, scrape=backend.scrape_configs(directory)) as url,
    ):
        settings.PORTAL_PROMETHEUS_URL = url

        def metered():
            ingest_since(started)
            rows = {
                row.flavor.slug: row
                for row in TeamUsage.objects.filter(team=vision).select_related("flavor")
            }
            done = all(
                rows.get(s) and rows[s].allocated_seconds >= 5 for s in ("h100-dra", "mig-dra")
            )
            return done and rows

        rows = wait_for(metered, timeout=90, interval=0.5)
        # Where the exporter names pods too, it names the ones the claims do.
        named = {}
        for series in prometheus.query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod!=""}'):
            labels = series.labels
            key = (labels["Hostname"], labels["gpu"], labels.get("GPU_I_ID", ""))
            named[key] = labels["exported_pod"]
    claimed = {
        exporter_device(row.node, row.device): row.pod for row in DraAllocation.objects.all()
    }
    assert named == claimed

    for slug in ("h100-dra", "mig-dra"):
        row = rows[slug]
        # Every second of it from the claims, none from kube-state-metrics' requests.
        assert row.dra_seconds == row.allocated_seconds
        assert (
            row.allocated_seconds == row.active_seconds + row.idle_seconds + row.unmetered_seconds
        )
    # Active or idle by the allocated device's own series: the idle pod's H100, the
    # busy pod's MIG slice.
    assert rows["h100-dra"].active_seconds == 0 and rows["h100-dra"].idle_seconds > 0
    assert rows["mig-dra"].active_seconds > 0
    assert rows["h100-dra"].price == Decimal("4.0000")
    assert rows["mig-dra"].price == Decimal("0.5714")  # 1/7 of the H100, as for mig-1g.10gb
    workloads = {
        (w.kind, w.name, w.flavor.slug, w.gpus)
        for w in WorkloadUsage.objects.filter(team=vision).select_related("flavor")
    }
    assert workloads == {("Pod", "train", "h100-dra", 1), ("Pod", "notebook", "mig-dra", 1)}

    client.force_login(alice)
    month = started.strftime("%Y-%m")
    page = client.get(f"/billing/teams/vision/?month={month}").content.decode()
    assert page.count("from DRA allocations") == 2  # both flavors
    page = client.get("/billing/teams/vision/workloads/vision/Pod/notebook/").content.decode()
    assert "from DRA allocations" in page


def test_a_dra_batch_job_is_metered_on_its_team_flavor_and_window(
    settings,
    dra_setup,  # noqa: F811
    backend,
    cluster,
):
    """The batch app's own DRA job: its pod's claim (from the job's template) is
    allocated by the real scheduler, recorded by the inventory, metered on the
    job's workload row at the window's off-peak factor."""
    require_prometheus()
    started = timezone.now()
    flavor, team = dra_setup["flavor"], dra_setup["team"]
    annotations = {"kubesim.io/duration": "120s", "kubesim.io/gpu-profile": "idle"}
    job = submit(dra_setup, flavor, parallelism=1, completions=1, annotations=annotations)
    batch_actions.replan(reason="test")
    assert launch.release_due() == [job.pk]
    name = manifests.job_name(job.pk)

    def recorded():
        cluster_actions.record_inventory()
        return list(DraAllocation.objects.filter(namespace="vision"))

    (held,) = wait_for(recorded, timeout=90, interval=1)
    assert (held.flavor_id, held.node, held.pod.startswith(name)) == (flavor.pk, "cpu-0", True)

    with (
        tempfile.TemporaryDirectory(prefix="billing-dra-batch-") as directory,
        metered_by(settings, directory, backend) as url,
    ):
        settings.PORTAL_PROMETHEUS_URL = url

        def metered():
            ingest_since(started)
            rows = WorkloadUsage.objects.filter(team=team, kind="Job", name=name, flavor=flavor)
            return sum(r.allocated_seconds for r in rows) >= 5 and list(rows)

        rows = wait_for(metered, timeout=90, interval=0.5)
    row = max(rows, key=lambda r: r.allocated_seconds)
    assert row.dra_seconds == row.allocated_seconds == row.idle_seconds + row.unmetered_seconds
    assert row.idle_seconds > 0 and row.active_seconds == 0
    # The window (factor 0.5, opened this hour) prices the part of the hour it
    # covers: the job's workload row is a batch row like any other.
    assert Decimal("0.5") <= row.price_factor < 1
    assert row.price == (Decimal("4.0000") * row.price_factor).quantize(Decimal("0.0001"))
