"""Live: a real Prometheus scrapes kubesim (DCGM per node through file_sd,
without honor_labels; kube-state-metrics with it), and an idle Job shows idle
hours on its report card."""

import contextlib
import json
import os
import tempfile
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from billing import actions
from billing.models import TeamUsage, WorkloadUsage
from kubesim.control import SMALL_CLUSTER
from kubesim.testing import running_kubesim
from tests.billing.promserver import require_prometheus, running_prometheus
from tests.factories import FlavorFactory
from tests.kubesim.simhelpers import Clients, job, wait_for

pytestmark = pytest.mark.prometheus


def scrape_configs(targets, port):
    return (
        "  - job_name: dcgm\n"
        f"    file_sd_configs: [{{files: ['{targets}'], refresh_interval: 1s}}]\n"
        "  - job_name: kube-state-metrics\n"
        "    honor_labels: true\n"
        "    metrics_path: /metrics/kube-state-metrics\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )


def ingest_since(started):
    """Ingest the hour so far (and the one before, if the clock turned meanwhile)."""
    for hour in {actions.hour_floor(started), actions.hour_floor(timezone.now())}:
        actions.ingest_hour(hour)


@contextlib.contextmanager
def metered_cluster(settings):
    """kubesim's small cluster with a `vision` namespace, a real Prometheus scraping
    its kube-state-metrics and per-node DCGM endpoints, and billing reading that
    Prometheus every second; yields (sim, its clients)."""
    require_prometheus()
    FlavorFactory(slug="h100", name="H100 80GB", gpu_model="NVIDIA-H100-80GB-HBM3")
    FlavorFactory(slug="l4", name="L4", gpu_model="NVIDIA-L4", memory_gb=24)
    settings.PORTAL_BILLING_STEP = 1
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    with (
        tempfile.TemporaryDirectory(prefix="billing-live-") as directory,
        running_kubesim(SMALL_CLUSTER) as sim,
    ):
        targets = os.path.join(directory, "dcgm-targets.json")
        sim.control_plane.keep_file_sd(targets, f"127.0.0.1:{sim.port}")
        k = Clients(sim)
        k.core.create_namespace({"metadata": {"name": "vision"}})
        with running_prometheus(directory, scrape=scrape_configs(targets, sim.port)) as url:
            settings.PORTAL_PROMETHEUS_URL = url
            yield sim, k


def test_an_idle_job_shows_idle_hours_on_its_report_card(settings, client, alice, vision):
    started = timezone.now()
    with metered_cluster(settings) as (_, k):
        annotations = {"kubesim.io/gpu-profile": "idle", "kubesim.io/duration": "1h"}
        k.batch.create_namespaced_job(
            "vision",
            job(
                "notebook",
                1,
                annotations,
                nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            ),
        )

        def metered_idle():
            ingest_since(started)
            rows = WorkloadUsage.objects.filter(namespace="vision", kind="Job", name="notebook")
            idle = sum(row.idle_seconds for row in rows)
            return idle >= 5 and rows

        rows = wait_for(metered_idle, timeout=30, interval=0.5)
    (row,) = [r for r in rows if r.idle_seconds]
    assert row.flavor.slug == "h100" and row.active_seconds == 0 and row.gpus == 1
    assert row.activity_mean == 0

    client.force_login(alice)
    page = client.get("/billing/teams/vision/workloads/vision/Job/notebook/").content.decode()
    assert "mean 0 %" in page
    assert "paid for GPUs doing nothing" in page
    assert timezone.now() - started < timedelta(minutes=2)


def test_a_pod_killed_by_an_xid_is_credited(settings, vision):
    """kubesim fails the pod on the GPU that reported XID 79; the exporter then
    shows the XID on that GPU; the run is credited from its start."""
    started = timezone.now()
    with metered_cluster(settings) as (sim, k):
        selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        k.batch.create_namespaced_job(
            "vision",
            job("trainer", 1, {"kubesim.io/duration": "1h"}, nodeSelector=selector),
        )

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
        (pod,) = k.core.list_namespaced_pod("vision").items
        node = pod.spec.node_name
        gpu = pod.metadata.annotations["kubesim.io/gpu-devices"].split("/")[1]
        request = urllib.request.Request(
            f"{sim.url}/_sim/nodes/{node}/gpus/{gpu}/xid",
            data=json.dumps({"code": 79}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert json.load(answer)["crashed"] == [f"vision/{pod.metadata.name}"]
        credited = wait_for(
            lambda: (row := h100_row()) and row.lost_seconds and row, timeout=30, interval=0.5
        )
    # The whole run up to the crash, one GPU: at least what was seen before it,
    # at most the test's time (the start is in whole seconds, the end a step's end).
    assert credited.lost_seconds >= held.allocated_seconds
    assert credited.lost_seconds <= (timezone.now() - started).total_seconds() + 2
