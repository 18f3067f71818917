from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent
from tests.api.conftest import client_for
from tests.factories import UserFactory, add_member, next_week, submit

URL = "/api/v1/quota-requests/"
ACTIONS = ["approve", "reject", "cancel", "revoke"]


def post(user, quota_request, action, **data):
    return client_for(user).post(f"{URL}{quota_request.pk}/{action}/", data, format="json")


def status_of(quota_request):
    return QuotaRequest.objects.get(pk=quota_request.pk).status


def make(status, *, team, flavor, by, reviewer):
    """A request brought to `status` the way the product does it: through the actions."""
    starts_at = timezone.now() if status in ("active", "expired") else next_week()
    quota_request = submit(team, flavor, by, starts_at=starts_at)
    if status in ("approved", "active", "expired", "revoked"):
        actions.approve(quota_request, by=reviewer)
    if status == "rejected":
        actions.reject(quota_request, by=reviewer)
    if status == "cancelled":
        actions.cancel(quota_request, by=by)
    if status == "revoked":
        actions.revoke(quota_request, by=reviewer)
    if status == "expired":
        actions.expire(quota_request)
    assert status_of(quota_request) == status
    return quota_request


def test_the_whole_life_of_a_request(alice, admin_user, vision, h100):
    start = timezone.now() + timedelta(hours=1)
    data = {
        "team": "vision",
        "flavor": "h100",
        "gpus": 4,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=2)).isoformat(),
        "justification": "Ablation study",
    }
    created = client_for(alice).post(URL, data, format="json")
    assert created.status_code == 201
    quota_request = QuotaRequest.objects.get(pk=created.json()["id"])

    approved = post(admin_user, quota_request, "approve", reason="Go ahead")
    assert approved.status_code == 200
    assert approved.json()["status"] == "approved"

    with time_machine.travel(start + timedelta(minutes=1)):
        actions.advance_lifecycle()
        shown = client_for(alice).get(f"{URL}{quota_request.pk}/").json()
        assert shown["status"] == "active"
        revoked = post(admin_user, quota_request, "revoke", reason="Maintenance")
    assert revoked.status_code == 200
    assert revoked.json()["status"] == "revoked"
    assert [(e["action"], e["actor"], e["reason"]) for e in revoked.json()["events"]] == [
        ("submit", "alice", ""),
        ("approve", "admin", "Go ahead"),
        ("activate", None, ""),
        ("revoke", "admin", "Maintenance"),
    ]


def test_approving_a_request_that_has_started_activates_it(alice, admin_user, vision, h100):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now())
    response = post(admin_user, quota_request, "approve")
    assert response.status_code == 200
    assert response.json()["status"] == "active"


@pytest.mark.parametrize(
    ("action", "actor", "status"),
    [
        ("approve", "admin_user", "approved"),
        ("reject", "admin_user", "rejected"),
        ("cancel", "alice", "cancelled"),  # the requester
        ("cancel", "carol", "cancelled"),  # the team's manager
    ],
)
def test_it_decides_a_pending_request(request, pending, action, actor, status):
    user = request.getfixturevalue(actor)
    response = post(user, pending, action, reason="Because")
    assert response.status_code == 200
    assert response.json()["status"] == status
    assert status_of(pending) == status
    event = pending.events.last()
    assert (event.action, event.actor, event.reason) == (action, user, "Because")


def test_a_decision_needs_no_body(pending, admin_user):
    response = client_for(admin_user).post(f"{URL}{pending.pk}/reject/")
    assert response.status_code == 200
    assert status_of(pending) == "rejected"


# Who may do what to a pending vision request of alice's (revoke: an approved one).
# Other teams get 404: they cannot see it. Members see it but may not review: 403.
MATRIX = {
    "approve": {"admin_user": 200, "alice": 403, "carol": 403, "bob": 404, "charlie": 404},
    "reject": {"admin_user": 200, "alice": 403, "carol": 403, "bob": 404, "charlie": 404},
    "cancel": {"admin_user": 403, "alice": 200, "carol": 200, "bob": 404, "charlie": 404},
    "revoke": {"admin_user": 200, "alice": 403, "carol": 403, "bob": 404, "charlie": 404},
}


@pytest.mark.parametrize("pk", ["999999", "9" * 30])  # the second past any bigint
@pytest.mark.parametrize("action", ["approve", "reject", "revoke"])
def test_a_reviewer_acting_on_a_request_that_is_not_there_gets_404(admin_user, action, pk):
    response = client_for(admin_user).post(f"{URL}{pk}/{action}/", {}, format="json")
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}
    assert AuditEvent.objects.count() == 0


@pytest.mark.parametrize(
    ("action", "persona", "expected"),
    [(action, who, code) for action, codes in MATRIX.items() for who, code in codes.items()]
    + [(action, None, 401) for action in ACTIONS],
    indirect=["persona"],
)
def test_authorization_matrix(
    persona, action, expected, vision, nlp, alice, carol, bob, charlie, admin_user, h100
):
    status = "approved" if action == "revoke" else "pending"
    quota_request = make(status, team=vision, flavor=h100, by=alice, reviewer=admin_user)
    events = AuditEvent.objects.count()
    response = post(persona, quota_request, action)
    assert response.status_code == expected, response.content
    if expected != 200:
        assert status_of(quota_request) == status
        assert AuditEvent.objects.count() == events
        assert set(response.json()) == {"detail"}


def test_another_member_may_not_cancel(pending, vision):
    dave = add_member(vision, UserFactory(username="dave"))
    response = post(dave, pending, "cancel")
    assert response.status_code == 403
    assert "requester or a team manager" in response.json()["detail"]
    assert status_of(pending) == "pending"


ALLOWED = {"pending": {"approve", "reject", "cancel"}, "approved": {"revoke"}, "active": {"revoke"}}
STATUSES = ["pending", "approved", "active", "rejected", "cancelled", "revoked", "expired"]


@pytest.mark.parametrize(
    ("status", "action"),
    [(s, a) for s in STATUSES for a in ACTIONS if a not in ALLOWED.get(s, set())],
)
def test_illegal_transitions_conflict(status, action, vision, alice, admin_user, h100):
    quota_request = make(status, team=vision, flavor=h100, by=alice, reviewer=admin_user)
    events = AuditEvent.objects.count()
    actor = alice if action == "cancel" else admin_user
    response = post(actor, quota_request, action)
    assert response.status_code == 409
    assert f"is {status}" in response.json()["detail"]
    assert status_of(quota_request) == status
    assert AuditEvent.objects.count() == events


def test_it_will_not_approve_a_period_that_has_ended(pending, admin_user):
    with time_machine.travel(pending.ends_at + timedelta(minutes=1)):
        response = post(admin_user, pending, "approve")
    assert response.status_code == 409
    assert "already ended" in response.json()["detail"]
    assert status_of(pending) == "pending"


def test_approving_beyond_capacity_conflicts(vision, nlp, alice, bob, admin_user, small):
    start = next_week()
    actions.approve(submit(nlp, small, bob, gpus=3, starts_at=start), by=admin_user)
    quota_request = submit(vision, small, alice, gpus=2, starts_at=start + timedelta(hours=2))
    response = post(admin_user, quota_request, "approve")
    assert response.status_code == 409
    body = response.json()
    assert {k: body[k] for k in ("flavor", "peak", "capacity", "requested")} == {
        "flavor": "t4",
        "peak": 3,
        "capacity": 4,
        "requested": 2,
    }
    assert "T4 16GB" in body["detail"]
    assert "3 of 4 GPUs" in body["detail"]
    assert status_of(quota_request) == "pending"


def test_back_to_back_periods_can_each_use_the_whole_flavor(vision, alice, admin_user, small):
    start = next_week()
    first = submit(vision, small, alice, gpus=4, starts_at=start, hours=24)
    # Periods are half-open: the second starts the instant the first ends.
    second = submit(vision, small, alice, gpus=4, starts_at=start + timedelta(hours=24), hours=24)
    assert post(admin_user, first, "approve").status_code == 200
    assert post(admin_user, second, "approve").status_code == 200


def test_overlapping_periods_share_the_flavor(vision, alice, admin_user, small):
    start = next_week()
    first = submit(vision, small, alice, gpus=4, starts_at=start, hours=24)
    overlapping = submit(vision, small, alice, gpus=1, starts_at=start + timedelta(hours=23))
    open_ended = submit(
        vision, small, alice, gpus=1, starts_at=start - timedelta(days=3), hours=None
    )
    assert post(admin_user, first, "approve").status_code == 200
    assert post(admin_user, overlapping, "approve").status_code == 409
    assert post(admin_user, open_ended, "approve").status_code == 409


def test_released_capacity_can_be_approved_again(vision, alice, admin_user, small):
    first = submit(vision, small, alice, gpus=4)
    second = submit(vision, small, alice, gpus=4)
    assert post(admin_user, first, "approve").status_code == 200
    assert post(admin_user, second, "approve").status_code == 409
    assert post(admin_user, first, "revoke").status_code == 200
    assert post(admin_user, second, "approve").status_code == 200


@pytest.mark.parametrize("action", ACTIONS)
def test_it_only_takes_post(admin_user, pending, action):
    assert client_for(admin_user).get(f"{URL}{pending.pk}/{action}/").status_code == 405
    assert status_of(pending) == "pending"


@pytest.mark.parametrize(
    ("starts", "status", "actions_seen"),
    [
        ("next week", "approved", ["submit", "approve"]),
        # Approved and activated at once: the same statements, both events in one INSERT.
        ("now", "active", ["submit", "approve", "activate"]),
    ],
)
def test_an_approval_costs_a_fixed_handful_of_queries_and_renders_no_email(
    admin_user, alice, vision, h100, django_assert_num_queries,
    django_capture_on_commit_callbacks, starts, status, actions_seen,
):  # fmt: skip
    from django.core import mail
    from rest_framework.authtoken.models import Token

    from gpu_requests import tasks
    from notifications.models import Webhook
    from provisioning.models import TeamSync

    # As in production: the team was synced before; it and the admins have a webhook.
    TeamSync.objects.create(team=vision, generation=1, synced_generation=1)
    Webhook.objects.create(team=vision, url="https://hooks.example.com/v", secret="x")
    Webhook.objects.create(team=None, url="https://hooks.example.com/a", secret="x")
    starts_at = next_week() if starts == "next week" else timezone.now()
    quota_request = submit(vision, h100, alice, starts_at=starts_at)
    client = client_for()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    mail.outbox.clear()
    # 14: the token and its user; the reviewer's permissions (two, none for a superuser);
    # in the transaction (BEGIN and COMMIT, here a savepoint and its release): the
    # request with its team, flavor and requester read and locked with its flavor (the
    # only read of it: a reviewer sees every request), the reservations (quota, batch
    # windows), the status moved, its audit event, the team's sync marked, the
    # deliveries made from the webhooks in one INSERT ... SELECT; after the commit, the
    # team sync's queued_at, written just before its message goes out (so a message
    # lost with the process is sent again at the next sweep); the history for the
    # answer. The deliveries go out as one message a worker fans out, the decision
    # email as another, rendered by a worker.
    with django_assert_num_queries(14), django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"{URL}{quota_request.pk}/approve/", {}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == status == status_of(quota_request)
    assert [e["action"] for e in response.json()["events"]] == actions_seen
    assert mail.outbox == []  # queued for a worker, not rendered in the request
    tasks.send_decision(AuditEvent.objects.get(action="approve").pk)  # what the worker runs
    assert mail.outbox[0].to == ["alice@example.com"]
    assert "was approved" in mail.outbox[0].subject
