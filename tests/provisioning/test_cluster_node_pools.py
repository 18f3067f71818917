"""The cluster page's node pools (issue 20): per pool, the GPU-hours nobody held over
the last day and week (from the billing ledger), the nodes holding no GPU pod now and
their cost per hour, and what scale to zero would have saved last week. The
inventory is read from the demo cluster on both backends; the ledger is written by
the action ingestion uses."""

import tempfile
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from billing.actions import hour_floor
from cluster import actions, kube
from kubesim.testing import running_kubesim
from tests.billing import history
from tests.billing.history import Node, Pod
from tests.billing.ledger import meter
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus
from tests.provisioning.test_inventory import run_train_pod

GPU_HOUR = 3600


def pool_row(page, pool):
    """The pool's row, its white space (and timesince's no-break spaces) made single spaces."""
    row = page.split(f"<strong>{pool}</strong>")[1].split("</tr>")[0]
    return " ".join(row.split())


def test_each_pool_shows_unallocated_hours_idle_nodes_and_the_saving(
    client, admin_user, vision, cluster, demo_flavors
):
    run_train_pod(cluster)
    actions.record_inventory()
    h100 = demo_flavors["h100"]
    last_hour = hour_floor(timezone.now()) - timedelta(hours=1)
    # Two hours of the last day with 8 of the 16 H100s held, one hour three days ago with none.
    for hour in (last_hour, last_hour - timedelta(hours=1)):
        meter(
            hour,
            {(vision, h100): (8 * GPU_HOUR, 8 * GPU_HOUR, 0, 0)},
            capacity={h100.pk: 16 * GPU_HOUR},
        )
    meter(last_hour - timedelta(days=3), capacity={h100.pk: 16 * GPU_HOUR})
    # Eight days ago: outside the week.
    meter(last_hour - timedelta(days=8), capacity={h100.pk: 16 * GPU_HOUR})

    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    assert "Node pools and scale to zero" in page
    row = pool_row(page, "h100")
    assert "2 nodes" in row
    assert "16 (3)" in row  # GPUs, held now
    assert "16 GPU-h" in row  # last day: 2 hours x 8 unallocated
    assert "32 GPU-h" in row  # last week: and 16 three days ago
    # gpu-h100-1 holds the pod; gpu-h100-0 holds nothing: 8 GPUs at 2.00.
    assert "gpu-h100-0</span> · 8 GPUs · 16.00 USD/h" in row
    assert "gpu-h100-1" not in row
    assert "Could have saved up to <strong>64.00 USD</strong>" in row  # 32 GPU-h x 2.00
    # A pool of the catalog's T4s, never held (capacity from the catalog: 8 GPUs).
    row = pool_row(page, "t4")
    assert "8 (0)" in row
    assert "16 GPU-h" in row and "24 GPU-h" in row
    assert "2 nodes, 8 GPUs: 16.00 USD per hour" in row  # two idle nodes of 4 T4s
    assert "Could have saved up to <strong>48.00 USD</strong>" in row
    # Seven MIG nodes with nothing on them: three named, all counted.
    row = pool_row(page, "a100-mig-3g")
    assert "gpu-a100-mig3g-0</span> · 2 GPUs · 4.00 USD/h" in row
    assert "and 4 more" in row and "7 nodes, 14 GPUs: 28.00 USD per hour" in row
    # No GPU, no pool row.
    assert "<strong>system</strong>" not in page


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def prometheus_url(settings):
    """Four hours of kube-state-metrics series: the H100 nodes with Karpenter's
    labels, a pod waiting three hours for 4 GPUs and one twenty minutes for a MIG
    slice, neither scheduled."""
    require_prometheus()
    karpenter = {
        "label_karpenter_sh_nodepool": "gpu-h100",
        "label_karpenter_sh_capacity_type": "on-demand",
    }
    nodes = [
        Node(f"gpu-h100-{i}", "NVIDIA-H100-80GB-HBM3", {"nvidia_com_gpu": 8}, karpenter)
        for i in range(2)
    ]
    later = NOW + timedelta(hours=1)
    pods = [
        Pod(
            "vision",
            "waiting",
            "",
            "nvidia_com_gpu",
            4,
            later,
            later,
            created=NOW - timedelta(hours=3),
        ),
        Pod(
            "nlp",
            "slice",
            "",
            "nvidia_com_mig_1g_10gb",
            1,
            later,
            later,
            created=NOW - timedelta(minutes=20),
        ),
    ]
    with tempfile.TemporaryDirectory(prefix="node-pools-") as directory:
        load_openmetrics(history.openmetrics(nodes, pods, NOW - timedelta(hours=4), NOW), directory)
        with running_prometheus(directory) as url:
            settings.PORTAL_PROMETHEUS_URL = url
            yield url


@pytest.mark.prometheus
def test_each_pool_shows_its_autoscaler_labels_and_the_gpu_pods_waiting(
    client, admin_user, demo_flavors, prometheus_url
):
    demo_flavors["a100-3g"].delete()  # the catalog has no 3g.40gb slice
    with running_kubesim() as sim:
        cluster = kube.Cluster(kube.load_configuration(sim.kubeconfig_path), timeout=10)
        try:
            actions.record_inventory(cluster=cluster)
        finally:
            cluster.close()
    client.force_login(admin_user)
    with time_machine.travel(NOW, tick=False):
        page = client.get("/cluster/").content.decode()
    row = pool_row(page, "h100")
    assert "<code>karpenter.sh/capacity-type=on-demand</code>" in row
    assert "<code>karpenter.sh/nodepool=gpu-h100</code>" in row
    assert "vision/waiting</span> · 4 GPUs · waiting 3 hours" in row
    assert "nlp/slice" not in row  # a MIG slice: not a resource of this pool
    # Any pool offering nvidia.com/gpu could take it; the MIG pod waits for its own.
    assert "vision/waiting" in pool_row(page, "t4")
    mig = pool_row(page, "a100-mig-1g")
    assert "nlp/slice</span> · 1 GPU · waiting 20 minutes" in mig
    assert "vision/waiting" not in mig
    assert "no autoscaler labels" in pool_row(page, "t4")
    assert (
        'gpu-a100-mig3g-0</span> · 2 GPUs · <span class="muted">no flavor of the catalog'
        in pool_row(page, "a100-mig-3g")
    )


def test_without_prometheus_the_pools_say_what_is_missing(client, admin_user, settings, db):
    settings.PORTAL_PROMETHEUS_URL = ""
    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    assert (
        "Waiting pods and autoscaler labels are not shown: PORTAL_PROMETHEUS_URL is not set" in page
    )
    assert "No GPU nodes yet" in page
