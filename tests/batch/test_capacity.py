"""Capacity is one model: window batch capacity is a reservation that quota
approvals count, and approved quota limits what a window may set aside."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from gpu_requests import actions as quota_actions
from gpu_requests import capacity
from gpu_requests.models import QuotaRequest
from tests.factories import submit


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
