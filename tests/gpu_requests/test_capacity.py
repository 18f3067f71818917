from datetime import timedelta

import pytest

from gpu_requests import actions, capacity
from gpu_requests.models import QuotaRequest
from tests.factories import FlavorFactory, next_week, submit


@pytest.fixture
def small(db):
    return FlavorFactory(slug="small", name="Small GPU", capacity=4)


def approved(team, flavor, by, admin, **kwargs):
    quota_request = submit(team, flavor, by, **kwargs)
    return actions.approve(quota_request, by=admin)


def test_requests_that_do_not_overlap_can_each_use_the_whole_flavor(
    alice, vision, small, admin_user
):
    monday = next_week()
    approved(vision, small, alice, admin_user, gpus=4, starts_at=monday, hours=24)
    # Half-open periods: the second starts exactly when the first ends.
    approved(vision, small, alice, admin_user, gpus=4, starts_at=monday + timedelta(days=1))
    assert QuotaRequest.objects.filter(status="approved").count() == 2


def test_overlapping_requests_cannot_exceed_capacity(alice, bob, vision, nlp, small, admin_user):
    monday = next_week()
    approved(vision, small, alice, admin_user, gpus=3, starts_at=monday, hours=48)
    late = submit(nlp, small, bob, gpus=2, starts_at=monday + timedelta(hours=47), hours=24)
    with pytest.raises(actions.CapacityExceeded) as excinfo:
        actions.approve(late, by=admin_user)
    assert str(excinfo.value) == (
        "Not enough Small GPU capacity: 3 of 4 GPUs are already reserved at the busiest "
        "moment of this period, so 2 more would need 5."
    )
    assert QuotaRequest.objects.get(pk=late.pk).status == "pending"


def test_the_peak_is_an_interval_question_not_a_sum(alice, vision, small, admin_user):
    monday = next_week()
    # Three reservations of 2 that never all overlap: 2 at most at any instant
    # before the last one, though their sum is 6.
    approved(vision, small, alice, admin_user, gpus=2, starts_at=monday, hours=10)
    approved(vision, small, alice, admin_user, gpus=2, starts_at=monday + timedelta(hours=10),
             hours=10)  # fmt: skip
    approved(vision, small, alice, admin_user, gpus=2, starts_at=monday + timedelta(hours=5),
             hours=10)  # fmt: skip
    week = (monday - timedelta(days=1), monday + timedelta(days=2))
    assert capacity.peak_reserved(small, *week) == 4
    # Fits at hour 0-5 (2 reserved), does not fit across hour 5-15 (4 reserved).
    approved(vision, small, alice, admin_user, gpus=2, starts_at=monday, hours=5)
    blocked = submit(vision, small, alice, gpus=1, starts_at=monday + timedelta(hours=12), hours=1)
    with pytest.raises(actions.CapacityExceeded):
        actions.approve(blocked, by=admin_user)


def test_open_ended_requests_reserve_forever(alice, vision, small, admin_user):
    monday = next_week()
    approved(vision, small, alice, admin_user, gpus=3, starts_at=monday, hours=None)
    far = submit(vision, small, alice, gpus=2, starts_at=monday + timedelta(days=300), hours=1)
    with pytest.raises(actions.CapacityExceeded):
        actions.approve(far, by=admin_user)
    before = submit(vision, small, alice, gpus=4, starts_at=monday - timedelta(days=1), hours=24)
    assert actions.approve(before, by=admin_user).status == "approved"  # ends as it starts


def test_rejected_cancelled_and_revoked_requests_free_capacity(alice, vision, small, admin_user):
    monday = next_week()
    first = approved(vision, small, alice, admin_user, gpus=4, starts_at=monday)
    actions.revoke(first, by=admin_user)
    cancelled = submit(vision, small, alice, gpus=4, starts_at=monday)
    actions.cancel(cancelled, by=alice)
    rejected = submit(vision, small, alice, gpus=4, starts_at=monday)
    actions.reject(rejected, by=admin_user, reason="not now")
    assert capacity.peak_reserved(small, monday, monday + timedelta(days=1)) == 0
    last = approved(vision, small, alice, admin_user, gpus=4, starts_at=monday)
    assert last.status == "approved"


def test_flavors_are_counted_apart(alice, vision, small, h100, admin_user):
    monday = next_week()
    approved(vision, small, alice, admin_user, gpus=4, starts_at=monday)
    # All of the small flavor reserved leaves the whole of H100 free.
    assert approved(vision, h100, alice, admin_user, gpus=16, starts_at=monday).status == "approved"


def test_the_peak_takes_a_query_per_source(
    alice, vision, small, admin_user, django_assert_num_queries
):
    monday = next_week()
    for hour in range(4):
        approved(vision, small, alice, admin_user, gpus=1, starts_at=monday + timedelta(hours=hour))
    # The quota requests, then each registered source (batch windows: their capacity).
    with django_assert_num_queries(1 + len(capacity._sources)):
        assert capacity.peak_reserved(small, monday, monday + timedelta(days=2)) == 4
