"""Capacity is what can run: a cordoned or NotReady node's GPUs, and a GPU whose
last XID took it out of service, are not counted as free on the cluster page, in
approvals' capacity (gpu_requests.capacity) or in the batch planner
(batch.actions.hostable_capacity), on kubesim and on the real control plane."""

import tempfile
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from batch.actions import hostable_capacity
from cluster import actions
from cluster.models import FlavorCapacity, GpuNode
from gpu_requests.capacity import free_over
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus
from tests.provisioning.test_inventory import run_train_pod
from tests.waiting import wait_for


def figures(flavor):
    """(capacity, allocated, free) of `flavor` after an inventory, and what approvals
    over the next day and a window's jobs off spot could be given of it."""
    actions.record_inventory()
    flavor.refresh_from_db()
    row = FlavorCapacity.objects.get(flavor=flavor)
    now = timezone.now()
    approvals = free_over([flavor], now, now + timedelta(days=1))[flavor.pk]
    return (
        row.devices,
        row.allocated,
        row.free,
        approvals,
        hostable_capacity(flavor, spot_allowed=False),
    )


def node_row(client, name):
    html = client.get("/cluster/").content.decode()
    return html.split(f'id="node-{name}"')[1].split("</tr>")[0]


def cordon(cluster, name):
    cluster.call(
        "PATCH",
        cluster.path("Node", name),
        body={"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
    )


def test_a_cordoned_nodes_gpus_are_not_free(cluster, demo_flavors, admin_client):
    run_train_pod(cluster)  # 3 GPUs of gpu-h100-1
    cordon(cluster, "gpu-h100-1")
    wait_for(lambda: cluster.get("Node", "gpu-h100-1")["spec"].get("unschedulable"))
    # 8 can run (gpu-h100-0), all free; the pod on the cordoned node holds 3 there.
    assert figures(demo_flavors["h100"]) == (8, 3, 8, 8, 8)
    assert GpuNode.objects.get(name="gpu-h100-1").resources() == [("nvidia.com/gpu", 8, 3, 0)]
    row = node_row(admin_client, "gpu-h100-1")
    assert '<td class="num">0</td>' in row and "cordoned" in row
    flavor_row = admin_client.get("/cluster/").content.decode().split('id="flavor-h100"')[1]
    cells = flavor_row.split("</tr>")[0]
    # capacity 8, approvals use 8, reserved 0, unreserved 8, allocated 3, not allocated 8
    assert cells.count('<td class="num">8</td>') == 4 and '<td class="num">3</td>' in cells


def test_a_not_ready_nodes_gpus_are_not_free(backend, cluster, demo_flavors, admin_client):
    backend.set_node_ready("gpu-h100-0", False)
    wait_for(
        lambda: (
            not any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in cluster.get("Node", "gpu-h100-0")["status"].get("conditions") or []
            )
        ),
        timeout=120,
    )
    assert figures(demo_flavors["h100"]) == (8, 0, 8, 8, 8)
    row = node_row(admin_client, "gpu-h100-0")
    assert '<td class="num">0</td>' in row and "not ready" in row


# --- GPU health: the exporter's last XID per GPU, from a real Prometheus ---


def _xid_series(samples):
    """OpenMetrics of DCGM_FI_DEV_XID_ERRORS for (node, gpu, code) over the last
    two minutes, every 15 s, as dcgm-exporter repeats a GPU's last XID."""
    now = int(time.time())
    lines = ["# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    for node, gpu, code in samples:
        labels = (
            f'gpu="{gpu}",UUID="GPU-{node}-{gpu}",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",err_code="{code}"'
        )
        lines += [
            f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {code} {t}" for t in range(now - 120, now, 15)
        ]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture
def xids(settings):
    """A Prometheus holding: GPU 2 of gpu-h100-0 fell off the bus (XID 79), GPU 5 of
    it had a double-bit ECC error (48), GPU 0 of gpu-h100-1 had an application's
    page fault (31: the GPU is fine)."""
    require_prometheus()
    samples = [("gpu-h100-0", 2, 79), ("gpu-h100-0", 5, 48), ("gpu-h100-1", 0, 31)]
    with tempfile.TemporaryDirectory(prefix="capacity-xid-") as directory:
        load_openmetrics(_xid_series(samples), directory)
        with running_prometheus(directory) as url:
            settings.PORTAL_PROMETHEUS_URL = url
            yield


@pytest.mark.prometheus
def test_gpus_an_xid_took_out_of_service_are_not_capacity(
    cluster, demo_flavors, xids, admin_client, settings
):
    assert figures(demo_flavors["h100"]) == (14, 0, 14, 14, 14)
    node = GpuNode.objects.get(name="gpu-h100-0")
    assert node.resources() == [("nvidia.com/gpu", 8, 0, 6)]
    assert [(x["gpu"], x["code"]) for x in node.xids] == [("2", 79), ("5", 48)]
    assert GpuNode.objects.get(name="gpu-h100-1").xids == []
    row = node_row(admin_client, "gpu-h100-0")
    assert "GPU 2: XID 79, out of service" in row and "GPU has fallen off the bus" in row
    assert "GPU 5: XID 48" in row
    assert "no XID" in node_row(admin_client, "gpu-h100-1")
    # Prometheus out of reach: the inventory runs on what the nodes report.
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"
    assert figures(demo_flavors["h100"]) == (16, 0, 16, 16, 16)
    assert GpuNode.objects.get(name="gpu-h100-0").xids == []
