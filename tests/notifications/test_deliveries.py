"""Notices become deliveries in the transaction of the change; each attempt is signed,
a failure worth retrying waits a doubling backoff, and the attempts are bounded."""

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from gpu_requests import actions as quota_actions
from notifications import actions
from notifications.models import Delivery
from tests.factories import submit
from tests.notifications.conftest import verify


def deliver_all(now=None):
    for pk in Delivery.objects.order_by("pk").values_list("pk", flat=True):
        actions.deliver(pk, now)


def test_a_submitted_request_reaches_the_team_and_the_admins_signed(
    team_hook, admin_hook, receiver, vision, alice, h100, django_capture_on_commit_callbacks
):
    (_, team_secret), (_, admin_secret) = team_hook, admin_hook
    with django_capture_on_commit_callbacks() as queued:
        quota_request = submit(
            vision, h100, alice, gpus=3, hours=None, reason="fine-tune <llama> & co"
        )
    assert len(queued) == 2  # the email, and the deliveries' messages
    deliver_all()
    to_team, to_admins = sorted(receiver.requests(), key=lambda r: "admins" in r.path)
    assert to_team.path == "/hooks/portal?channel=gpu"
    assert to_admins.path.endswith("&admins=1")
    assert verify(team_secret, to_team.headers, to_team.body)
    assert verify(admin_secret, to_admins.headers, to_admins.body)
    assert not verify(admin_secret, to_team.headers, to_team.body)
    assert to_team.headers["X-Portal-Event"] == "request_submitted"
    body = to_team.json
    assert body["text"] == (
        f"alice asks for 3 x H100 80GB for Vision (request #{quota_request.pk}): "
        f"http://127.0.0.1:8000/requests/{quota_request.pk}/"
    )
    # Slack's escaping in blocks; the justification quoted.
    assert ">fine-tune &lt;llama&gt; &amp; co" in json.dumps(body["blocks"])
    assert body["metadata"]["event_type"] == "request_submitted"
    payload = body["metadata"]["event_payload"]
    # Open-ended: no end, and no null for it (Slack's metadata takes none).
    assert "ends_at" not in payload and None not in payload.values()
    assert (payload["quota_request"], payload["team"], payload["gpus"]) == (
        quota_request.pk,
        "vision",
        3,
    )
    assert set(Delivery.objects.values_list("status", "attempts", "response_code")) == {
        ("delivered", 1, 200)
    }


def test_names_in_the_text_cannot_ping_or_link_in_slack(team_hook, receiver, vision, h100):
    # A single sign-on user's name is whatever the identity provider says.
    from tests.factories import UserFactory, add_member

    mallory = add_member(vision, UserFactory(username="<!channel> <https://evil.example|x>&"))
    submit(vision, h100, mallory, gpus=1)
    deliver_all()
    body = receiver.requests()[0].json
    assert body["text"].startswith(
        "&lt;!channel&gt; &lt;https://evil.example|x&gt;&amp; asks for 1 x H100 80GB"
    )
    assert "<!channel>" not in json.dumps(body["text"]) + json.dumps(body["blocks"])


def test_decisions_and_comments_go_out_too(
    team_hook, receiver, vision, alice, admin_user, h100, django_capture_on_commit_callbacks
):
    quota_request = submit(vision, h100, alice)
    quota_actions.approve(quota_request, by=admin_user, reason="ok")
    quota_actions.comment(quota_request, by=alice, body="thanks!")
    deliver_all()
    events = [r.headers["X-Portal-Event"] for r in receiver.requests()]
    assert events == ["request_submitted", "request_approved", "request_commented"]
    assert "was approved by admin" in receiver.requests()[1].json["text"]


def test_other_teams_notices_do_not_reach_a_teams_hook(team_hook, receiver, nlp, bob, h100):
    submit(nlp, h100, bob)
    assert Delivery.objects.count() == 0


def test_a_rolled_back_change_leaves_no_delivery(team_hook, vision, alice, h100):
    with pytest.raises(RuntimeError), transaction.atomic():
        submit(vision, h100, alice)
        raise RuntimeError("the change fails after the notice")
    assert Delivery.objects.count() == 0


def test_no_hooks_cost_one_query(vision, alice, h100, django_assert_num_queries):
    from notifications.actions import notice_posted
    from teams.notices import Notice

    with django_assert_num_queries(1):
        notice_posted(Notice("request_submitted", vision.pk, "t", "http://x/"))


def test_a_notice_to_two_hooks_costs_one_query(
    team_hook, admin_hook, receiver, nlp, vision, admin_user, django_assert_num_queries
):
    from notifications.actions import notice_posted
    from teams.notices import Notice

    actions.set_webhook(nlp, receiver.url + "&nlp=1", by=admin_user)
    with django_assert_num_queries(1):  # INSERT ... SELECT over the hooks
        notice_posted(Notice("request_submitted", vision.pk, "t", "http://x/"))
    # The team's hook and the admins', not another team's.
    assert sorted(Delivery.objects.values_list("webhook__team__slug", flat=True), key=str) == [
        None,
        "vision",
    ]
    assert set(Delivery.objects.values_list("status", "event", "attempts")) == {
        ("pending", "request_submitted", 0)
    }


def test_a_failure_waits_a_doubling_backoff_then_gives_up(
    team_hook, receiver, vision, alice, h100, settings
):
    settings.PORTAL_WEBHOOK_BACKOFF = 30
    settings.PORTAL_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.answer(500, 502, 503)
    submit(vision, h100, alice)
    delivery = Delivery.objects.get()
    now = timezone.now()
    assert actions.deliver(delivery.pk, now) == 30
    # Not due yet: nothing is sent, whoever asks.
    assert actions.deliver(delivery.pk, now + timedelta(seconds=10)) is None
    assert len(receiver.requests()) == 1
    assert actions.due(now + timedelta(seconds=10)) == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("pending", 1, 500)
    assert delivery.error == "HTTP 500: no_service"
    assert actions.deliver(delivery.pk, delivery.next_attempt_at) == 60
    delivery.refresh_from_db()
    assert actions.deliver(delivery.pk, delivery.next_attempt_at) is None
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("failed", 3, 503)
    assert len(receiver.requests()) == 3
    # Given up: neither the sweep nor a stray message sends it again.
    later = timezone.now() + timedelta(days=1)
    assert actions.due(later) == [] and actions.deliver(delivery.pk, later) is None
    # Every attempt carried the same body and delivery id, each signed.
    sent = receiver.requests()
    assert len({(r.body, r.headers["X-Portal-Delivery"]) for r in sent}) == 1


def test_a_gone_hook_is_not_retried(team_hook, receiver, vision, alice, h100):
    receiver.answer(410)
    submit(vision, h100, alice)
    delivery = Delivery.objects.get()
    assert actions.deliver(delivery.pk) is None
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("failed", 1, 410)


def test_too_many_requests_is_retried_after_its_retry_after(
    team_hook, receiver, vision, alice, h100, settings
):
    settings.PORTAL_WEBHOOK_BACKOFF = 1
    receiver.answer(429)
    submit(vision, h100, alice)
    assert actions.deliver(Delivery.objects.get().pk) == 1


@pytest.mark.parametrize("retry_after", ["²", "soon", "-5", "9" * 40, "Wed, 99 Foo 2026"])
def test_a_retry_after_that_says_nothing_is_the_usual_backoff(
    team_hook, receiver, vision, alice, h100, settings, retry_after
):
    settings.PORTAL_WEBHOOK_BACKOFF = 1
    receiver.headers["Retry-After"] = retry_after
    receiver.answer(503)
    submit(vision, h100, alice)
    delivery = Delivery.objects.get()
    delay = actions.deliver(delivery.pk)
    delivery.refresh_from_db()
    # The attempt is recorded and the delivery waits for its next one.
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("pending", 1, 503)
    assert delay == 1 or retry_after.startswith("9")


def test_a_retry_after_date_is_waited_for():
    from datetime import UTC, datetime

    from notifications import outbound

    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert outbound.retry_after_seconds("Tue, 01 Dec 2026 12:02:00 GMT", now) == 120
    assert outbound.retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0
    assert outbound.retry_after_seconds(" 30 ", now) == 30
    assert outbound.retry_after_seconds("²", now) is None


def test_the_sweep_requeues_a_delivery_whose_message_was_lost(
    team_hook, receiver, vision, alice, h100, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        submit(vision, h100, alice)  # the message never goes out
    delivery = Delivery.objects.get()
    assert actions.due() == [delivery.pk]


def test_settled_deliveries_leave_the_log_after_the_retention(
    team_hook, receiver, vision, alice, h100, settings
):
    settings.PORTAL_WEBHOOK_LOG_DAYS = 30
    receiver.answer(410)
    submit(vision, h100, alice)
    submit(vision, h100, alice)
    settled, pending = Delivery.objects.order_by("pk")
    actions.deliver(settled.pk)
    assert actions.prune(timezone.now() + timedelta(days=29)) == 0
    # A month on, the failed one goes; the one still pending stays.
    assert actions.prune(timezone.now() + timedelta(days=31)) == 1
    assert list(Delivery.objects.values_list("pk", flat=True)) == [pending.pk]


def test_the_lifecycle_sweep_tells_the_hooks_in_three_queries(
    team_hook, admin_hook, receiver, vision, nlp, alice, bob, admin_user, h100,
    django_assert_num_queries,
):  # fmt: skip
    from gpu_requests.models import QuotaRequest

    soon = timezone.now() + timedelta(minutes=1)
    for team, who in [(vision, alice), (nlp, bob)] * 3:
        quota_actions.approve(submit(team, h100, who, gpus=1, starts_at=soon), by=admin_user)
    Delivery.objects.all().delete()  # those of the submissions and approvals
    later = timezone.now() + timedelta(minutes=2)
    # As for none (tests/gpu_requests/test_lifecycle.py), plus the one INSERT of every delivery.
    with django_assert_num_queries(3 + 5 + 4 + 2 + 1):
        assert quota_actions.advance_lifecycle(now=later) == {"expired": 0, "activated": 6}
    # Vision's three to its hook and the admins'; NLP's three to the admins' only.
    assert Delivery.objects.filter(webhook__team=vision).count() == 3
    assert Delivery.objects.filter(webhook__team=None).count() == 6
    first = QuotaRequest.objects.filter(team=vision).order_by("pk").first()
    delivery = Delivery.objects.filter(webhook__team=vision).order_by("pk").first()
    actions.deliver(delivery.pk)
    (sent,) = receiver.requests()
    assert sent.headers["X-Portal-Event"] == "request_activated"
    assert sent.json["text"].startswith(
        f"Request #{first.pk} (Vision, 1 x H100 80GB) is active: its quota is on the cluster"
    )


def test_the_backoff_doubles_up_to_an_hour(settings):
    settings.PORTAL_WEBHOOK_BACKOFF = 30
    assert [actions.backoff(n) for n in (1, 2, 3, 7, 8, 30)] == [30, 60, 120, 1920, 3600, 3600]
