"""The cluster page's node pools (issue 20): per pool, the GPU-hours nobody held over
the last day and week (from the billing ledger), the nodes holding no GPU pod now and
their cost per hour, and what scale to zero would have saved last week. The
inventory is read from the demo cluster on both backends; the ledger is written by
the action ingestion uses."""

from datetime import timedelta

from django.utils import timezone

from billing.actions import hour_floor
from cluster import actions
from tests.billing.ledger import meter

GPU_HOUR = 3600


def pool_row(page, pool):
    row = page.split(f"<strong>{pool}</strong>")[1].split("</tr>")[0]
    return " ".join(row.split())


def test_each_pool_shows_unallocated_hours_idle_nodes_and_the_saving(
    client, admin_user, vision, cluster, demo_flavors
):
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}},
        field_manager="test",
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "vision"},
        "spec": {
            "nodeName": "gpu-h100-1",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "pytorch:2",
                    "resources": {"limits": {"nvidia.com/gpu": "3"}},
                }
            ],
        },
    }
    cluster.call("POST", cluster.path("Pod", namespace="vision"), body=pod)
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
    assert "together 16.00 USD per hour" in row  # two idle nodes of 4 T4s
    assert "Could have saved up to <strong>48.00 USD</strong>" in row
    # No GPU, no pool row.
    assert "<strong>system</strong>" not in page
