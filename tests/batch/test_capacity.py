"""Capacity is one model: window batch capacity is a reservation that quota
approvals count, and approved quota limits what a window may set aside."""

from datetime import time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from batch import actions as batch_actions
from batch.models import BatchJob
from cluster import actions as cluster_actions
from cluster import inventory
from gpu_requests import actions as quota_actions
from gpu_requests import capacity
from gpu_requests.models import QuotaRequest
from tests.factories import FlavorFactory, submit


def test_approving_quota_cannot_eat_batch_capacity(nightly, vision, alice, admin_user, h100):
    # h100: 16 GPUs; the nightly window sets 8 aside every night.
    starts = timezone.now() + timedelta(days=1)
    request = submit(vision, h100, alice, gpus=10, starts_at=starts, hours=48)
    with pytest.raises(quota_actions.CapacityExceeded) as refused:
        quota_actions.approve(request, by=admin_user)
    assert refused.value.peak == 8
    fits = submit(vision, h100, alice, gpus=8, starts_at=starts, hours=48)
    quota_actions.approve(fits, by=admin_user)
    fits.refresh_from_db()
    assert fits.status == QuotaRequest.Status.APPROVED


def test_a_day_without_the_window_leaves_the_whole_flavor(nightly, vision, alice, admin_user, h100):
    # 10:00 to 18:00 New York time (15:00-23:00 UTC in winter): no window is open.
    day = timezone.now().astimezone(ZoneInfo(nightly.timezone))
    start = (day + timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)
    end = start + timedelta(hours=8)
    assert capacity.free_over([h100], start, end) == {h100.pk: 16}
    request = submit(vision, h100, alice, gpus=16, starts_at=start, ends_at=end)
    quota_actions.approve(request, by=admin_user)
    request.refresh_from_db()
    assert request.status == QuotaRequest.Status.APPROVED


def test_the_review_queue_counts_both(nightly, vision, alice, h100):
    starts = timezone.now() + timedelta(days=1)
    request = submit(vision, h100, alice, gpus=10, starts_at=starts, hours=48)
    view = capacity.capacity_views([request])[request.pk]
    assert (view.peak, view.fits) == (8, False)
    held = capacity.all_reservations([h100.pk], starts, starts + timedelta(days=2))
    assert {r.source for r in held} == {"batch window"}


# --- a window without spot plans only on the nodes its jobs can land on ---


def test_a_window_without_spot_plans_nothing_once_only_spot_nodes_are_left(
    admin_user, allowlist, vision, alice, demo_flavors, backend, cluster
):
    # Any nvidia.com/gpu node: H100, A100, T4 on demand, L4 on spot.
    any_gpu = FlavorFactory(slug="any-gpu", name="Any GPU", node_selector={}, capacity=0)
    cluster_actions.record_inventory()
    any_gpu.refresh_from_db()
    window = batch_actions.save_window(
        None,
        by=admin_user,
        capacity={any_gpu: 8},
        name="Nights",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    # The on-demand nodes are cordoned for maintenance: the window's 8 GPUs stay set
    # aside, but only spot nodes, which its jobs are kept off, serve the flavor now.
    on_demand = [
        node["metadata"]["name"]
        for node in cluster.list("Node")
        if inventory.allocatable_gpus(node).get("nvidia.com/gpu") and not inventory.is_spot(node)
    ]
    for name in on_demand:
        cordon(cluster, name, True)
    cluster_actions.record_inventory()
    job = batch_actions.submit(by=alice, team=vision, flavor=any_gpu, **JOB)
    batch_actions.replan(reason="test")
    job.refresh_from_db()
    assert (job.status, job.window_id) == (BatchJob.Status.QUEUED, None)

    for name in on_demand:
        cordon(cluster, name, False)
    cluster_actions.record_inventory()
    batch_actions.replan(reason="test")
    job.refresh_from_db()
    assert (job.status, job.window_id) == (BatchJob.Status.PLANNED, window.pk)


JOB = {
    "name": "train",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "command": ["python", "train.py"],
    "args": [],
    "env": [],
    "gpus": 2,
    "parallelism": 1,
    "completions": 1,
    "expected_runtime_minutes": 60,
    "max_runtime_minutes": 60,
    "spot_allowed": False,
    "priority": 0,
}


def cordon(cluster, name, unschedulable):
    cluster.call(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body={"spec": {"unschedulable": unschedulable or None}},
        content_type="application/merge-patch+json",
    )
