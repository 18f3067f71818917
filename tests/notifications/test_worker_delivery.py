"""A real Celery worker delivers to a real receiver: retried with a doubling
backoff while the receiver fails, and given up after the last attempt."""

from django.db import transaction

from notifications.models import Delivery
from tests.factories import submit
from tests.notifications.conftest import verify
from tests.waiting import wait_for


def settled(pk):
    delivery = Delivery.objects.get(pk=pk)
    return delivery if delivery.status != Delivery.Status.PENDING else None


def test_a_worker_retries_with_backoff_until_the_receiver_answers(
    webhook_workers, team_hook, receiver, vision, alice, h100
):
    _, secret = team_hook
    receiver.answer(503, 500)  # then 200
    webhook_workers.start("w1")
    with transaction.atomic():
        submit(vision, h100, alice)
    delivery = wait_for(lambda: settled(Delivery.objects.get().pk), timeout=30)
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.error) == (
        "delivered",
        3,
        200,
        "",
    )
    first, second, third = receiver.requests()
    # PORTAL_WEBHOOK_BACKOFF=1: one second after the first failure, two after the second.
    assert second.at - first.at >= 1.0
    assert third.at - second.at >= 2.0
    assert all(verify(secret, r.headers, r.body) for r in (first, second, third))
    # Each attempt is signed afresh over the same body.
    assert first.body == third.body
    assert first.headers["X-Portal-Delivery"] == third.headers["X-Portal-Delivery"]


def test_a_worker_gives_up_after_the_last_attempt(
    webhook_workers, team_hook, receiver, vision, alice, h100
):
    receiver.answer(500, 500, 500, 500, 500)
    webhook_workers.start("w1")
    with transaction.atomic():
        submit(vision, h100, alice)
    delivery = wait_for(lambda: settled(Delivery.objects.get().pk), timeout=30)
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("failed", 3, 500)
    assert len(receiver.requests()) == 3  # PORTAL_WEBHOOK_MAX_ATTEMPTS=3


def test_a_worker_delivers_a_change_to_the_team_and_the_admins(
    webhook_workers, team_hook, admin_hook, receiver, vision, alice, h100
):
    # The request that made them sends one message; the worker queues one per hook.
    webhook_workers.start("w1")
    with transaction.atomic():
        submit(vision, h100, alice)
    for pk in Delivery.objects.values_list("pk", flat=True):
        assert wait_for(lambda pk=pk: settled(pk), timeout=30).status == "delivered"
    paths = sorted(request.path for request in receiver.requests())
    assert paths == ["/hooks/portal?channel=gpu", "/hooks/portal?channel=gpu&admins=1"]
