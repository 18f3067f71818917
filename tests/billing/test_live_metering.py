"""Live, on both cluster backends: a real Prometheus scrapes the cluster's
kube-state-metrics (kubesim's page, or the real kube-state-metrics against the
real API server) with honor_labels and a DCGM exporter page per GPU node
without it (kubesim's, or controlplane/dcgm.py's), and an idle Job shows idle
hours on its report card."""

import contextlib
import tempfile
from datetime import timedelta

import pytest
from django.utils import timezone

from billing import actions
from billing.models import TeamUsage, WorkloadUsage
from tests.billing.promserver import require_prometheus, running_prometheus
from tests.factories import FlavorFactory
from tests.kubesim.simhelpers import job
from tests.waiting import wait_for

pytestmark = pytest.mark.prometheus


def ingest_since(started):
    """Ingest the hour so far (and the one before, if the clock turned meanwhile)."""
    for hour in {actions.hour_floor(started), actions.hour_floor(timezone.now())}:
        actions.ingest_hour(hour)


@contextlib.contextmanager
def metered_cluster(settings, backend, cluster):
    """The demo cluster with a `vision` namespace, a real Prometheus scraping its
    kube-state-metrics and per-node DCGM pages, and billing reading that
    Prometheus every second."""
    require_prometheus()
    FlavorFactory(slug="h100", name="H100 80GB", gpu_model="NVIDIA-H100-80GB-HBM3")
    FlavorFactory(slug="l4", name="L4", gpu_model="NVIDIA-L4", memory_gb=24)
    settings.PORTAL_BILLING_STEP = 1
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}},
        field_manager="tests",
    )
    with (
        tempfile.TemporaryDirectory(prefix="billing-live-") as directory,
        running_prometheus(directory, scrape=backend.scrape_configs(directory)) as url,
    ):
        settings.PORTAL_PROMETHEUS_URL = url
        yield


def create_job(cluster, name, annotations, product):
    body = job(
        name,
        1,
        annotations,
        nodeSelector={"nvidia.com/gpu.product": product},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    cluster.call(
        "POST",
        "/apis/batch/v1/namespaces/vision/jobs",
        body={"apiVersion": "batch/v1", "kind": "Job", **body},
    )


def test_an_idle_job_shows_idle_hours_on_its_report_card(
    settings,
    client,
    alice,
    vision,
    backend,
    cluster,
):
    started = timezone.now()
    with metered_cluster(settings, backend, cluster):
        annotations = {"kubesim.io/gpu-profile": "idle", "kubesim.io/duration": "1h"}
        create_job(cluster, "notebook", annotations, "NVIDIA-H100-80GB-HBM3")

        def metered_idle():
            ingest_since(started)
            rows = WorkloadUsage.objects.filter(namespace="vision", kind="Job", name="notebook")
            idle = sum(row.idle_seconds for row in rows)
            return idle >= 5 and rows

        rows = wait_for(metered_idle, timeout=60, interval=0.5)
    (row,) = [r for r in rows if r.idle_seconds]
    assert row.flavor.slug == "h100" and row.active_seconds == 0 and row.gpus == 1
    assert row.activity_mean == 0

    client.force_login(alice)
    page = client.get("/billing/teams/vision/workloads/vision/Job/notebook/").content.decode()
    assert "mean 0 %" in page
    assert "paid for GPUs doing nothing" in page
    assert timezone.now() - started < timedelta(minutes=2)


@pytest.mark.kubesim_only("XIDs are injected into kubesim's GPUs")
def test_a_pod_killed_by_an_xid_is_named_on_gpu_health_and_credited(
    settings, vision, backend, cluster, client, admin_user
):
    """The exporter shows XID 79 on the pod's GPU while the pod still holds it, so
    GPU health names the job hit; 30 s later on kubesim's clock the pod fails (its
    next CUDA call), and the run is credited from its start."""
    started = timezone.now()
    with metered_cluster(settings, backend, cluster):
        create_job(cluster, "trainer", {"kubesim.io/duration": "1h"}, "NVIDIA-H100-80GB-HBM3")

        def h100_row():
            ingest_since(started)
            rows = TeamUsage.objects.filter(team=vision, flavor__slug="h100")
            return rows.order_by("-hour").first()

        held = wait_for(
            lambda: (row := h100_row()) and row.allocated_seconds >= 3 and row,
            timeout=30,
            interval=0.5,
        )
        assert held.lost_seconds == 0
        (pod,) = cluster.list("Pod", namespace="vision")
        node = pod["spec"]["nodeName"]
        gpu = pod["metadata"]["annotations"]["kubesim.io/gpu-devices"].split("/")[1]
        answer = backend.xid(node, gpu, 79)
        name = pod["metadata"]["name"]
        assert answer["crashing"] == [f"vision/{name}"]

        client.force_login(admin_user)

        def named_on_health_page():
            page = client.get("/billing/health/").content.decode()
            return f"vision/{name}" in page and "GPU has fallen off the bus" in page and page

        page = wait_for(named_on_health_page, timeout=30, interval=0.5)
        assert f"kubectl drain {node}" in page
        assert cluster.list("Pod", namespace="vision")[0]["status"]["phase"] == "Running"
        backend.pass_time(30)
        credited = wait_for(
            lambda: (row := h100_row()) and row.lost_seconds and row, timeout=30, interval=0.5
        )
    # The whole run up to the crash, one GPU: at least what was seen before it,
    # at most the test's time (the start is in whole seconds, the end a step's end).
    assert credited.lost_seconds >= held.allocated_seconds
    assert credited.lost_seconds <= (timezone.now() - started).total_seconds() + 2
