"""Live, on both cluster backends (kubesim's kube-state-metrics page, or the real
kube-state-metrics against the real API server, scraped by a real Prometheus):
an idle notebook Deployment's pod is metered under its Deployment, the name its
owner knows and its idle notice links, not under its ReplicaSet."""

import pytest
from django.utils import timezone

from billing.models import WorkloadUsage
from tests.billing.test_live_metering import ingest_since, metered_cluster
from tests.kubesim.simhelpers import pod_spec
from tests.waiting import wait_for

pytestmark = pytest.mark.prometheus


def notebook(product):
    labels = {"app": "notebook"}
    spec = pod_spec(1, restart_policy="Always", nodeSelector={"nvidia.com/gpu.product": product})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "notebook", "namespace": "vision"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"kubesim.io/gpu-profile": "idle"}},
                "spec": spec,
            },
        },
    }


def test_a_deployments_pod_is_metered_under_its_deployment(
    settings, client, alice, vision, backend, cluster
):
    started = timezone.now()
    with metered_cluster(settings, backend, cluster):
        cluster.apply(notebook("NVIDIA-H100-80GB-HBM3"), field_manager="tests")

        def metered():
            ingest_since(started)
            rows = WorkloadUsage.objects.filter(namespace="vision")
            return sum(row.idle_seconds for row in rows) >= 5 and rows

        rows = wait_for(metered, timeout=90, interval=0.5)
    assert {(row.kind, row.name) for row in rows} == {("Deployment", "notebook")}
    client.force_login(alice)
    card = client.get("/billing/teams/vision/workloads/vision/Deployment/notebook/")
    assert card.status_code == 200
    assert "paid for GPUs doing nothing" in card.content.decode()
