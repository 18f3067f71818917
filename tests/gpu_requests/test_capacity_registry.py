"""Other apps' reservations (batch windows) count wherever capacity is counted,
through `capacity.register_reservations`; and the timeline agrees with the SQL peak."""

from datetime import timedelta

import pytest
from django.urls import reverse

from gpu_requests import actions, capacity
from gpu_requests.models import QuotaRequest
from tests.factories import next_week, peak_by_hand, submit


@pytest.fixture
def window(h100):
    """A registered source holding 10 H100s for the whole of next week (as a batch window would)."""
    start = next_week(days=6)

    def batch_windows(flavor_ids, starts_at, ends_at):
        held = capacity.Reservation(1, h100.pk, None, start, start + timedelta(days=3), 10, "batch")
        meets = held.ends_at > starts_at and (ends_at is None or held.starts_at < ends_at)
        return [held] if h100.pk in flavor_ids and meets else []

    capacity.register_reservations(batch_windows)
    yield start
    capacity.unregister_reservations(batch_windows)


def test_an_approval_counts_the_registered_reservations(window, vision, alice, h100, admin_user):
    too_many = submit(vision, h100, alice, gpus=7, starts_at=window + timedelta(hours=1))
    with pytest.raises(actions.CapacityExceeded) as refused:
        actions.approve(too_many, by=admin_user)
    assert refused.value.peak == 10
    fits = submit(vision, h100, alice, gpus=6, starts_at=window + timedelta(hours=1))
    assert actions.approve(fits, by=admin_user).status == QuotaRequest.Status.APPROVED
    # Outside the window the whole flavor is free again.
    later = submit(vision, h100, alice, gpus=10, starts_at=window + timedelta(days=4))
    assert actions.approve(later, by=admin_user).status == QuotaRequest.Status.APPROVED


def test_the_review_queue_counts_them_too(window, client, vision, alice, h100, admin_user):
    pending = submit(vision, h100, alice, gpus=2, starts_at=window)
    client.force_login(admin_user)
    page = client.get(reverse("review_queue")).content.decode()
    row = page.split(f'id="req-{pending.pk}"')[1].split("</tr>")[0]
    assert '10</span> → <strong class="num">12</strong> of 16 GPUs' in row


def test_a_quota_request_and_a_source_with_the_same_pk_are_told_apart(
    window, vision, alice, h100, admin_user
):
    approved = actions.approve(submit(vision, h100, alice, gpus=3, starts_at=window), by=admin_user)
    peak = capacity.peak_reserved(h100, window, window + timedelta(hours=1), exclude=approved)
    assert peak == 10


@pytest.mark.parametrize(
    ("start_hours", "hours"),
    [(0, 1), (0, 100), (13, 5), (-100, 60), (40, None), (-72, None), (200, 3), (23, 1), (24, 1)],
)
def test_the_timeline_agrees_with_the_peak_counted_by_hand(
    admin_user, vision, alice, h100, start_hours, hours
):
    start = next_week()
    for offset, length, gpus in [(0, 24, 3), (12, 48, 4), (30, None, 2), (-48, 24, 5), (24, 2, 1)]:
        req = submit(
            vision, h100, alice, gpus=gpus, starts_at=start + timedelta(hours=offset), hours=length
        )
        actions.approve(req, by=admin_user)
    starts_at = start + timedelta(hours=start_hours)
    ends_at = None if hours is None else starts_at + timedelta(hours=hours)
    expected = peak_by_hand(h100, starts_at, ends_at)
    assert capacity.peak_reserved(h100, starts_at, ends_at) == expected


def test_timeline_steps_and_levels():
    t = next_week()
    hour = timedelta(hours=1)
    held = [
        capacity.Reservation(1, 1, 1, t, t + 2 * hour, 2),
        capacity.Reservation(2, 1, 1, t + hour, None, 3),
    ]
    timeline = capacity.Timeline(held)
    assert [
        timeline.at(t - hour),
        timeline.at(t),
        timeline.at(t + hour),
        timeline.at(t + 5 * hour),
    ] == [
        0,
        2,
        5,
        3,
    ]
    assert timeline.peak(t - 2 * hour, t) == 0  # half-open: ends as the first starts
    assert timeline.peak(t + 2 * hour, None) == 3
    assert timeline.steps(t - hour, t + 3 * hour) == [
        (t - hour, t, 0),
        (t, t + hour, 2),
        (t + hour, t + 2 * hour, 5),
        (t + 2 * hour, t + 3 * hour, 3),
    ]
