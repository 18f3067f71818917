"""A quota request's audit events name it as their subject; the history outlives
nothing: a request with events is never deleted, and its events never with it."""

import pytest
from django.db.models import ProtectedError

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.factories import submit


def test_a_request_with_history_cannot_be_deleted(vision, alice, admin_user, h100):
    request = submit(vision, h100, alice)
    actions.reject(request, by=admin_user, reason="not now")
    with pytest.raises(ProtectedError):
        request.delete()
    with pytest.raises(ProtectedError):
        QuotaRequest.objects.filter(pk=request.pk).delete()
    assert QuotaRequest.objects.filter(pk=request.pk).exists()
    assert [event.action for event in request.events.all()] == ["submit", "reject"]


def test_the_events_keep_it_not_the_request_itself(vision, alice, h100):
    # Made without the actions, so without an event: nothing keeps it.
    request = QuotaRequest.objects.create(
        team=vision, flavor=h100, gpus=1, starts_at=submit(vision, h100, alice).starts_at,
        justification="by hand", requested_by=alice,
    )  # fmt: skip
    request.delete()
    assert QuotaRequest.objects.count() == 1


def test_an_event_names_its_request_as_its_subject(vision, alice, h100):
    request = submit(vision, h100, alice)
    event = request.events.get()
    assert (event.subject, event.team, event.action) == (request, vision, "submit")
