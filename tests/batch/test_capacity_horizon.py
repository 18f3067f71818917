"""Quota and batch windows are checked against each other over the same horizon,
however far ahead quota was approved (issue 17: windows were checked 366 days
ahead while approvals reached further, and a later approval saw "12 of 8 GPUs
reserved"), and a window never sets aside more than its flavor has."""

from datetime import time, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from batch import actions
from batch.models import BatchWindow
from cluster import capacity
from gpu_requests import actions as quota_actions
from tests.factories import FlavorFactory, submit

EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


@pytest.fixture
def eight(db):
    return FlavorFactory(slug="l4", name="L4", capacity=8)


def far_quota(team, flavor, user, admin, gpus):
    """Approved quota from just under a year ahead (as far as a request may start), for
    300 days: its first hour is the only one inside the year ahead of now."""
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    starts = now + quota_actions.MAX_LEAD - timedelta(hours=1)
    held = submit(team, flavor, user, gpus=gpus, starts_at=starts, hours=300 * 24)
    quota_actions.approve(held, by=admin)
    return held


def window(admin, flavor, gpus, *, avoiding, enabled=True, name="Daily"):
    """Two hours every day (UTC) that never meet the hour `avoiding` starts at."""
    opens = (avoiding.hour + 3) % 24
    return actions.save_window(
        None,
        by=admin,
        capacity={flavor: gpus},
        name=name,
        timezone="UTC",
        days=EVERY_DAY,
        start_time=time(opens),
        end_time=time((opens + 2) % 24),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
        enabled=enabled,
    )


def test_a_window_is_checked_against_quota_beyond_a_year(vision, alice, admin_user, eight):
    held = far_quota(vision, eight, alice, admin_user, gpus=6)
    with pytest.raises(ValidationError) as refused:
        window(admin_user, eight, 4, avoiding=held.starts_at)
    assert "6 of the flavor's 8 are already reserved" in str(refused.value)
    assert not BatchWindow.objects.exists()
    window(admin_user, eight, 2, avoiding=held.starts_at)


def test_enabling_a_window_later_is_checked_the_same_way(vision, alice, admin_user, eight):
    held = far_quota(vision, eight, alice, admin_user, gpus=6)
    off = window(admin_user, eight, 4, avoiding=held.starts_at, enabled=False)
    fields = {
        name: getattr(off, name)
        for name in ("name", "timezone", "days", "start_time", "end_time", "end_day", "exceptions")
    }
    with pytest.raises(ValidationError):
        actions.save_window(
            off,
            by=admin_user,
            capacity={eight: 4},
            **fields,
            price_factor=off.price_factor,
            spot_allowed=False,
            enabled=True,
        )


def test_approving_far_quota_counts_the_windows(vision, alice, admin_user, eight):
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    starts = now + quota_actions.MAX_LEAD - timedelta(hours=1)
    window(admin_user, eight, 4, avoiding=starts)
    held = submit(vision, eight, alice, gpus=6, starts_at=starts, hours=300 * 24)
    with pytest.raises(quota_actions.CapacityExceeded) as refused:
        quota_actions.approve(held, by=admin_user)
    assert (refused.value.peak, refused.value.capacity) == (4, 8)
    open_ended = submit(vision, eight, alice, gpus=6, starts_at=starts, ends_at=None, hours=None)
    with pytest.raises(quota_actions.CapacityExceeded):
        quota_actions.approve(open_ended, by=admin_user)


def test_lowering_capacity_counts_windows_beside_far_quota(vision, alice, admin_user, eight):
    eight.capacity = 16
    eight.save()
    held = far_quota(vision, eight, alice, admin_user, gpus=6)
    window(admin_user, eight, 4, avoiding=held.starts_at)
    # 6 of quota and 4 of the window at once, from a year ahead: 8 is too few.
    with pytest.raises(capacity.OverCommitted):
        capacity.change_capacity(eight, 8, by=admin_user)
    capacity.change_capacity(eight, 10, by=admin_user)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_window_larger_than_its_flavor_is_refused_even_disabled(admin_user, eight, enabled):
    with pytest.raises(ValidationError) as refused:
        window(admin_user, eight, 9, avoiding=timezone.now(), enabled=enabled)
    assert "would set 9 GPUs aside, but the flavor has 8" in str(refused.value)
    assert not BatchWindow.objects.exists()


def test_the_admin_form_refuses_a_disabled_window_larger_than_its_flavor(client, admin_user, h100):
    from tests.batch.test_admin import window_form

    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    data = window_form(capacity_text="h100=17")
    del data["enabled"]
    response = client.post("/admin/batch/batchwindow/add/", data)
    assert response.status_code == 200
    assert "but the flavor has 16" in response.content.decode()
    assert not BatchWindow.objects.exists()
