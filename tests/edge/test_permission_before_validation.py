"""Admin-only endpoints say 403 to a member before judging what they sent (issue 17).

Validation that ran first let a member's NUL byte in a dict key or slug reach
PostgreSQL (a 500), and told them which of their inputs was wrong.
"""

import pytest

from batch.models import BatchWindow
from billing.models import Rate
from gpu_requests.models import QuotaRequest
from tests.api.conftest import client_for
from tests.batch.test_api_windows import window_data
from tests.factories import submit

HOSTILE_BODIES = [
    window_data(capacity={"h1\x0000": 8}),
    window_data(capacity={"h100": 8}, name="x\x00"),
    window_data(capacity="not a dict"),
    {},
]


@pytest.mark.parametrize("body", HOSTILE_BODIES)
def test_a_member_creating_a_window_is_refused_whatever_the_body(alice, h100, body):
    response = client_for(alice).post("/api/v1/batch-windows/", body, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only platform admins can change batch windows."}
    assert not BatchWindow.objects.exists()


def test_a_member_changing_a_window_is_refused_whatever_the_body(alice, admin_user, h100):
    created = client_for(admin_user).post("/api/v1/batch-windows/", window_data(), format="json")
    url = f"/api/v1/batch-windows/{created.json()['id']}/"
    for body in HOSTILE_BODIES:
        response = client_for(alice).patch(url, body, format="json")
        assert response.status_code == 403, body
    # Members still read them.
    assert client_for(alice).get(url).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"flavor": "h1\x0000", "effective_from": "2026-12-01T00:00:00Z"},
        {"flavor": "h100", "mig_parent": "\x00", "effective_from": "2026-12-01T00:00:00Z"},
        {"flavor": ["x"]},
    ],
)
def test_a_member_adding_a_rate_is_refused_whatever_the_body(alice, h100, body):
    response = client_for(alice).post("/api/v1/billing/rates/", body, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only platform admins can change prices."}
    assert not Rate.objects.exists()
    assert client_for(alice).get("/api/v1/billing/rates/").status_code == 200


def test_an_admin_still_gets_the_validation_errors(admin_user, h100):
    response = client_for(admin_user).post(
        "/api/v1/batch-windows/", window_data(capacity={"h1\x0000": 8}), format="json"
    )
    assert response.status_code == 400


@pytest.mark.parametrize("action", ["approve", "reject", "revoke"])
def test_a_member_deciding_is_refused_before_the_reason_is_read(alice, vision, h100, action):
    pending = submit(vision, h100, alice)
    url = f"/api/v1/quota-requests/{pending.pk}/{action}/"
    for body in [{"reason": "x\x00"}, {"reason": ["a list"]}, {"reason": "x" * 100_000}]:
        response = client_for(alice).post(url, body, format="json")
        assert response.status_code == 403, body
    pending.refresh_from_db()
    assert pending.status == QuotaRequest.Status.PENDING


def test_someone_else_cancelling_is_refused_before_the_reason_is_read(alice, carol, vision, h100):
    from tests.factories import UserFactory, add_member

    dave = add_member(vision, UserFactory(username="dave"))
    pending = submit(vision, h100, alice)
    url = f"/api/v1/quota-requests/{pending.pk}/cancel/"
    response = client_for(dave).post(url, {"reason": "x\x00"}, format="json")
    assert response.status_code == 403
    # The requester with the same bad reason is told what is wrong with it.
    response = client_for(alice).post(url, {"reason": "x\x00"}, format="json")
    assert response.status_code == 400


def test_the_web_approve_refuses_a_member_before_reading_the_reason(client, alice, vision, h100):
    pending = submit(vision, h100, alice)
    client.force_login(alice)
    response = client.post(f"/requests/{pending.pk}/approve/", {"reason": "x" * 100_000})
    assert response.status_code == 403
