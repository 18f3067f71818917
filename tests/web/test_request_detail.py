"""The detail page and the POST-only endpoints it posts to."""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.factories import UserFactory, add_member, submit

Status = QuotaRequest.Status


def detail(req):
    return reverse("request_detail", args=[req.pk])


def endpoint(name, req):
    return reverse(f"request_{name}", args=[req.pk])


@pytest.fixture
def users(alice, carol, bob, charlie, admin_user):
    return {"alice": alice, "carol": carol, "bob": bob, "charlie": charlie, "admin": admin_user}


def test_it_redirects_anonymous_to_login(client, pending):
    response = client.get(detail(pending))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize(
    ("who", "status"),
    [("alice", 200), ("carol", 200), ("admin", 200), ("bob", 404), ("charlie", 404)],
)
def test_it_shows_the_request_to_its_team_and_reviewers_only(login, users, pending, who, status):
    response = login(users[who]).get(detail(pending))
    assert response.status_code == status
    if status == 404:
        assert b"Not found" in response.content
        assert b"Fine-tune" not in response.content


def test_it_shows_all_fields_cost_and_history(login, alice, pending):
    response = login(alice).get(detail(pending))
    page = response.content.decode()
    assert f"Request #{pending.pk}" in page
    assert '<span class="badge status-pending">Pending</span>' in page
    assert "H100 80GB" in page and "Vision" in page
    assert "192.00 USD" in page
    assert pending.starts_at.strftime("%Y-%m-%d %H:%M UTC") in page
    assert "(24 h)" in page
    assert "Submitted:" in page and "alice" in page


def test_it_says_when_another_flavor_shares_the_resource(login, alice, pending, a100):
    response = login(alice).get(detail(pending))
    assert b"A100 80GB uses the same resource name" in response.content


@pytest.mark.parametrize(
    ("who", "buttons"),
    [
        ("alice", {"Cancel request"}),  # the requester
        ("carol", {"Cancel request"}),  # the team's manager
        ("admin", {"Approve", "Reject"}),
    ],
)
def test_it_shows_the_buttons_the_viewer_may_use(login, users, pending, who, buttons):
    page = login(users[who]).get(detail(pending)).content.decode()
    for label in ["Approve", "Reject"]:
        assert (f">{label}</button>" in page) == (label in buttons), label
    # Destructive ones lead to the confirmation page.
    for label in ["Cancel request", "Revoke quota"]:
        assert (f">{label}…</a>" in page) == (label in buttons), label


def test_a_plain_member_who_did_not_ask_cannot_cancel(login, vision, alice, h100):
    dave = add_member(vision, UserFactory(username="dave"))
    req = submit(vision, h100, alice)
    assert b"Cancel request" not in login(dave).get(detail(req)).content
    response = login(dave).post(endpoint("cancel", req))
    assert response.status_code == 403
    assert QuotaRequest.objects.get().status == Status.PENDING


def test_it_offers_revoke_for_approved_quota(login, admin_user, pending):
    actions.approve(pending, by=admin_user)
    page = login(admin_user).get(detail(pending)).content.decode()
    assert ">Revoke quota…</a>" in page
    assert ">Approve</button>" not in page


@pytest.mark.parametrize("name", ["approve", "reject"])
def test_get_is_not_allowed(login, admin_user, pending, name):
    response = login(admin_user).get(endpoint(name, pending))
    assert response.status_code == 405


@pytest.mark.parametrize(("name", "who"), [("cancel", "alice"), ("revoke", "admin")])
def test_destructive_actions_confirm_on_a_page_of_their_own(
    login, users, admin_user, pending, name, who
):
    if name == "revoke":
        actions.approve(pending, by=admin_user)
    before = QuotaRequest.objects.get().status
    page = login(users[who]).get(endpoint(name, pending)).content.decode()
    assert '<section class="card narrow confirm">' in page
    assert f'<form method="post" action="{endpoint(name, pending)}"' in page
    assert QuotaRequest.objects.get().status == before  # GET changes nothing


@pytest.mark.parametrize("name", ["cancel", "approve", "reject", "revoke"])
def test_anonymous_posts_go_to_login(client, pending, name):
    response = client.post(endpoint(name, pending))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert QuotaRequest.objects.get().status == Status.PENDING


# Who may do what: 404 when the request is not theirs to see, 403 when they
# see it but may not act on it, otherwise the action runs.
MATRIX = [
    ("cancel", "alice", 302, Status.CANCELLED),
    ("cancel", "carol", 302, Status.CANCELLED),
    ("cancel", "admin", 403, Status.PENDING),
    ("cancel", "bob", 404, Status.PENDING),
    ("cancel", "charlie", 404, Status.PENDING),
    ("approve", "admin", 302, Status.APPROVED),
    ("approve", "alice", 403, Status.PENDING),
    ("approve", "carol", 403, Status.PENDING),
    ("approve", "bob", 404, Status.PENDING),
    ("approve", "charlie", 404, Status.PENDING),
    ("reject", "admin", 302, Status.REJECTED),
    ("reject", "alice", 403, Status.PENDING),
    ("reject", "carol", 403, Status.PENDING),
    ("reject", "bob", 404, Status.PENDING),
    ("reject", "charlie", 404, Status.PENDING),
]


@pytest.mark.parametrize(("name", "who", "status_code", "after"), MATRIX)
def test_authorization_matrix(login, users, pending, name, who, status_code, after):
    response = login(users[who]).post(endpoint(name, pending))
    assert response.status_code == status_code
    assert QuotaRequest.objects.get().status == after


@pytest.mark.parametrize(
    ("who", "status_code", "after"),
    [
        ("admin", 302, Status.REVOKED),
        ("alice", 403, Status.APPROVED),
        ("carol", 403, Status.APPROVED),
        ("bob", 404, Status.APPROVED),
        ("charlie", 404, Status.APPROVED),
    ],
)
def test_revoke_matrix(login, users, admin_user, pending, who, status_code, after):
    actions.approve(pending, by=admin_user)
    response = login(users[who]).post(endpoint("revoke", pending))
    assert response.status_code == status_code
    assert QuotaRequest.objects.get().status == after


def test_it_approves_with_a_reason_and_emails_the_requester(
    login, admin_user, pending, django_capture_on_commit_callbacks, eager
):
    # eager: the decision email is a task; it runs here as a worker would run it.
    with django_capture_on_commit_callbacks(execute=True):
        response = login(admin_user).post(endpoint("approve", pending), {"reason": "go ahead"})
    assert response["Location"] == detail(pending)
    page = login(admin_user).get(detail(pending)).content.decode()
    assert f"Request #{pending.pk} approved." in page
    assert "go ahead" in page
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]
    assert "was approved" in mail.outbox[0].subject


def test_it_rejects_and_emails_the_requester(
    login, admin_user, pending, django_capture_on_commit_callbacks, eager
):
    with django_capture_on_commit_callbacks(execute=True):
        login(admin_user).post(endpoint("reject", pending), {"reason": "too many"})
    assert QuotaRequest.objects.get().status == Status.REJECTED
    assert "was rejected" in mail.outbox[0].subject
    assert "too many" in mail.outbox[0].body


def test_it_shows_an_illegal_transition_as_a_message(login, alice, admin_user, pending):
    actions.cancel(pending, by=alice)
    client = login(admin_user)
    response = client.post(endpoint("approve", pending), follow=True)
    assert response.status_code == 200
    assert b"is cancelled; only pending requests can be approved" in response.content
    response = client.post(endpoint("revoke", pending), follow=True)
    assert b"only approved or active requests can be revoked" in response.content


def test_it_shows_capacity_exceeded_as_a_message(login, vision, alice, admin_user, h100):
    first = submit(vision, h100, alice, gpus=10)
    second = submit(vision, h100, alice, gpus=10)
    actions.approve(first, by=admin_user)
    response = login(admin_user).post(endpoint("approve", second), follow=True)
    assert response.status_code == 200
    assert b"Not enough H100 80GB capacity" in response.content
    assert QuotaRequest.objects.get(pk=second.pk).status == Status.PENDING


def test_it_shows_the_capacity_view_to_reviewers(login, admin_user, pending):
    page = login(admin_user).get(detail(pending)).content.decode()
    assert '0</span> → <strong class="num">2</strong> of 16 GPUs' in page


def test_it_follows_a_safe_next_only(login, admin_user, pending):
    response = login(admin_user).post(
        endpoint("reject", pending), {"next": "https://evil.example/"}
    )
    assert response["Location"] == detail(pending)


def test_approving_a_started_request_activates_it(login, vision, alice, admin_user, h100):
    req = submit(vision, h100, alice, starts_at=timezone.now() - timedelta(minutes=1))
    login(admin_user).post(endpoint("approve", req))
    page = login(alice).get(detail(req)).content.decode()
    assert '<span class="badge status-active">Active</span>' in page
