"""Reviewers approving at the same moment must not overbook a flavor.

Only PostgreSQL shows this: SQLite runs one writer at a time, so it cannot
race. Each thread has its own database connection (Django's are
per-thread), and a barrier starts them together.
"""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.factories import (
    FlavorFactory,
    TeamFactory,
    UserFactory,
    add_member,
    make_reviewer,
    next_week,
    peak_by_hand,
    submit,
)

pytestmark = pytest.mark.postgres

REQUESTS = 6
GPUS_EACH = 2
CAPACITY = 4


def run_together(work, count):
    """Call work(i) for i in range(count), from `count` threads at once."""
    barrier = threading.Barrier(count)
    results = [None] * count

    def run(i):
        try:
            barrier.wait(timeout=10)
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()  # else the test database cannot be flushed or dropped

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return results


@pytest.fixture
def contested(transactional_db):
    """Six pending requests of 2 GPUs each on a 4-GPU flavor, all overlapping.

    They start an hour apart and last a day, so they all meet from the sixth's
    start on; the capacity check has to find the peak, not just the start.
    """
    flavor = FlavorFactory(slug="l4", name="L4 24GB", capacity=CAPACITY)
    team = TeamFactory(slug="vision")
    alice = add_member(team, UserFactory(username="alice"))
    start = next_week()
    requests = [
        submit(team, flavor, alice, gpus=GPUS_EACH, starts_at=start + timedelta(hours=i))
        for i in range(REQUESTS)
    ]
    return flavor, [quota_request.pk for quota_request in requests]


def assert_never_overbooked(flavor, request_ids):
    approved = QuotaRequest.objects.filter(pk__in=request_ids, status="approved")
    assert approved.count() == CAPACITY // GPUS_EACH
    assert QuotaRequest.objects.filter(pk__in=request_ids, status="pending").count() == (
        REQUESTS - CAPACITY // GPUS_EACH
    )
    for quota_request in QuotaRequest.objects.filter(pk__in=request_ids):
        peak = peak_by_hand(flavor, quota_request.starts_at, quota_request.ends_at)
        assert peak <= CAPACITY


def test_concurrent_approvals_through_the_actions(contested):
    flavor, request_ids = contested
    reviewer_id = make_reviewer("admin").pk

    def approve(i):
        reviewer = get_user_model().objects.get(pk=reviewer_id)
        try:
            actions.approve(QuotaRequest.objects.get(pk=request_ids[i]), by=reviewer)
        except actions.CapacityExceeded:
            return "full"
        return "approved"

    results = run_together(approve, REQUESTS)
    assert sorted(map(str, results)) == ["approved"] * 2 + ["full"] * 4
    assert_never_overbooked(flavor, request_ids)


def test_concurrent_approvals_through_the_api(contested):
    flavor, request_ids = contested
    reviewer_id = make_reviewer("admin").pk

    def approve(i):
        client = APIClient()
        client.force_authenticate(get_user_model().objects.get(pk=reviewer_id))
        response = client.post(f"/api/v1/quota-requests/{request_ids[i]}/approve/")
        return response.status_code, response.json()

    results = run_together(approve, REQUESTS)
    assert sorted(code for code, _ in results) == [200] * 2 + [409] * 4
    for code, body in results:
        if code == 409:
            assert (body["flavor"], body["capacity"], body["requested"]) == ("l4", 4, 2)
            assert body["peak"] + body["requested"] > body["capacity"]
    assert_never_overbooked(flavor, request_ids)
