from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone

from gpu_requests import actions
from gpu_requests.models import QuotaAction, QuotaRequest
from gpu_requests.tasks import advance_lifecycle
from teams import actions as team_actions
from teams import errors
from teams.models import AuditEvent, Team
from tests.factories import submit

Status = QuotaRequest.Status


def statuses(quota_request):
    return list(quota_request.events.values_list("from_status", "to_status", "actor__username"))


def test_it_submits_a_pending_request_with_its_cost(
    transactional_db, alice, vision, h100, admin_user
):
    quota_request = submit(vision, h100, alice, gpus=2, hours=10)
    quota_request.refresh_from_db()
    assert quota_request.status == Status.PENDING
    assert str(quota_request.estimated_cost) == "80.00"  # 2 GPUs x 10 h x 4.00
    assert statuses(quota_request) == [("", "pending", "alice")]
    assert [m.to for m in mail.outbox] == [["admin@example.com"]]
    assert "2 x H100 80GB" in mail.outbox[0].subject


def test_it_stores_no_cost_for_open_ended_requests(alice, vision, h100):
    quota_request = submit(vision, h100, alice, hours=None)
    assert quota_request.ends_at is None
    assert quota_request.estimated_cost is None
    assert quota_request.hourly_cost == 8


def test_it_approves_and_mails_the_requester(
    transactional_db, alice, vision, h100, admin_user, eager
):
    # eager: the decision email is a task; it runs here as a worker would run it.
    quota_request = submit(vision, h100, alice)
    mail.outbox.clear()
    actions.approve(quota_request, by=admin_user, reason="fits")
    quota_request.refresh_from_db()
    assert quota_request.status == Status.APPROVED
    assert statuses(quota_request)[-1] == ("pending", "approved", "admin")
    assert mail.outbox[0].to == ["alice@example.com"]
    assert "approved" in mail.outbox[0].subject
    assert "fits" in mail.outbox[0].body


def test_it_activates_at_once_when_approved_after_the_start(alice, vision, h100, admin_user):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now())
    actions.approve(quota_request, by=admin_user)
    quota_request.refresh_from_db()
    assert quota_request.status == Status.ACTIVE
    assert statuses(quota_request)[-2:] == [
        ("pending", "approved", "admin"),
        ("approved", "active", None),
    ]


def test_it_rejects_with_a_reason(transactional_db, alice, vision, h100, admin_user, eager):
    quota_request = submit(vision, h100, alice)
    actions.reject(quota_request, by=admin_user, reason="too many")
    event = quota_request.events.last()
    assert (event.to_status, event.reason) == ("rejected", "too many")
    assert "too many" in mail.outbox[-1].body


def test_the_requester_and_a_manager_can_cancel(alice, carol, vision, h100):
    first, second = submit(vision, h100, alice), submit(vision, h100, alice)
    actions.cancel(first, by=alice)
    actions.cancel(second, by=carol)
    assert set(QuotaRequest.objects.values_list("status", flat=True)) == {"cancelled"}


def test_other_members_cannot_cancel(alice, vision, h100, carol, admin_user):
    other = actions.submit(
        team=vision,
        flavor=h100,
        gpus=1,
        starts_at=submit(vision, h100, carol).starts_at,
        ends_at=None,
        justification="x",
        by=carol,
    )
    with pytest.raises(errors.NotAllowed):
        actions.cancel(other, by=alice)


def test_only_reviewers_decide(alice, carol, vision, h100):
    quota_request = submit(vision, h100, alice)
    for action in (actions.approve, actions.reject):
        with pytest.raises(errors.NotAllowed):
            action(quota_request, by=carol)
    assert QuotaRequest.objects.get().status == Status.PENDING


def test_admins_revoke_approved_and_active_quota(alice, vision, h100, admin_user):
    upcoming = submit(vision, h100, alice)
    running = submit(vision, h100, alice, starts_at=timezone.now())
    for quota_request in (upcoming, running):
        actions.approve(quota_request, by=admin_user)
        actions.revoke(quota_request, by=admin_user, reason="incident")
    assert set(QuotaRequest.objects.values_list("status", flat=True)) == {"revoked"}


ILLEGAL = [
    # (how to get there, action that must fail)
    ("cancel", actions.approve),
    ("cancel", actions.reject),
    ("cancel", actions.cancel),
    ("cancel", actions.revoke),
    ("reject", actions.approve),
    ("reject", actions.cancel),
    ("reject", actions.revoke),
    ("approve", actions.approve),
    ("approve", actions.reject),
    ("approve", actions.cancel),
    ("revoke", actions.approve),
    ("revoke", actions.revoke),
    ("revoke", actions.cancel),
    ("expire", actions.approve),
    ("expire", actions.revoke),
    ("expire", actions.cancel),
    ("pending", actions.revoke),
    ("pending", actions.activate),
    ("pending", actions.expire),
]


@pytest.mark.parametrize(("state", "action"), ILLEGAL)
def test_it_refuses_illegal_transitions(alice, vision, h100, admin_user, state, action):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now())
    if state == "cancel":
        actions.cancel(quota_request, by=alice)
    elif state in ("approve", "revoke", "expire"):
        actions.approve(quota_request, by=admin_user)
        if state == "revoke":
            actions.revoke(quota_request, by=admin_user)
        if state == "expire":
            actions.expire(quota_request)
    elif state == "reject":
        actions.reject(quota_request, by=admin_user)
    before = QuotaRequest.objects.get(pk=quota_request.pk).status
    events = AuditEvent.objects.count()
    stale = QuotaRequest.objects.get(pk=quota_request.pk)
    stale.status = Status.PENDING  # a copy loaded before someone else acted
    kwargs = {} if action in (actions.activate, actions.expire) else {"by": admin_user}
    if action is actions.cancel:
        kwargs = {"by": alice}
    with pytest.raises(errors.IllegalTransition) as excinfo:
        action(stale, **kwargs)
    assert f"#{quota_request.pk} is" in str(excinfo.value)
    assert QuotaRequest.objects.get(pk=quota_request.pk).status == before
    assert AuditEvent.objects.count() == events


def test_the_beat_task_activates_and_expires_on_time(alice, vision, h100, admin_user):
    start = timezone.now() + timedelta(days=1)
    quota_request = submit(vision, h100, alice, starts_at=start, hours=2)
    actions.approve(quota_request, by=admin_user)

    with time_machine.travel(start - timedelta(seconds=1)):
        advance_lifecycle()
    assert QuotaRequest.objects.get().status == Status.APPROVED

    with time_machine.travel(start):
        advance_lifecycle()
    assert QuotaRequest.objects.get().status == Status.ACTIVE

    with time_machine.travel(start + timedelta(hours=2)):
        advance_lifecycle()
        advance_lifecycle()  # a second sweep finds nothing to do
    assert QuotaRequest.objects.get().status == Status.EXPIRED
    assert statuses(quota_request)[-2:] == [
        ("approved", "active", None),
        ("active", "expired", None),
    ]


def test_a_request_whose_whole_period_passed_unseen_expires(alice, vision, h100, admin_user):
    start = timezone.now() + timedelta(hours=1)
    quota_request = submit(vision, h100, alice, starts_at=start, hours=1)
    actions.approve(quota_request, by=admin_user)
    with time_machine.travel(start + timedelta(days=3)):
        assert advance_lifecycle() == {"activated": 0, "expired": 1}
    assert QuotaRequest.objects.get().status == Status.EXPIRED


def test_pending_requests_are_left_alone_by_the_beat(alice, vision, h100):
    submit(vision, h100, alice, starts_at=timezone.now(), hours=1)
    with time_machine.travel(timezone.now() + timedelta(days=2)):
        advance_lifecycle()
    assert QuotaRequest.objects.get().status == Status.PENDING


def test_it_refuses_to_approve_a_period_that_has_ended(alice, vision, h100, admin_user):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now(), hours=1)
    later = timezone.now() + timedelta(hours=2)
    with time_machine.travel(later), pytest.raises(errors.IllegalTransition, match="ended"):
        actions.approve(quota_request, by=admin_user)


def test_the_audit_names_the_status_really_left(alice, vision, h100, admin_user):
    quota_request = submit(vision, h100, alice, starts_at=timezone.now())
    stale = QuotaRequest.objects.get(pk=quota_request.pk)  # loaded while pending
    actions.approve(quota_request, by=admin_user)  # approved, then active at once
    actions.revoke(stale, by=admin_user)
    assert statuses(quota_request)[-1] == ("active", "revoked", "admin")


def test_a_mail_server_that_is_down_does_not_fail_the_action(
    transactional_db, alice, vision, h100, admin_user, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    quota_request = submit(vision, h100, alice)
    actions.approve(quota_request, by=admin_user)
    assert QuotaRequest.objects.get().status == Status.APPROVED


def test_rejecting_or_cancelling_leaves_the_cluster_alone(
    django_capture_on_commit_callbacks, alice, vision, h100, admin_user
):
    from provisioning.models import TeamSync

    with django_capture_on_commit_callbacks(execute=True):
        actions.reject(submit(vision, h100, alice), by=admin_user)
        actions.cancel(submit(vision, h100, alice), by=alice)
    assert not TeamSync.objects.filter(team=vision).exists()
    with django_capture_on_commit_callbacks(execute=True):
        actions.approve(submit(vision, h100, alice, starts_at=timezone.now()), by=admin_user)
    # Approved and activated at once: one change of the desired state.
    assert TeamSync.objects.get(team=vision).generation == 1


def test_an_archived_team_asks_for_and_gets_no_more_quota(alice, vision, h100, admin_user):
    pending = submit(vision, h100, alice)
    team_actions.archive_team(vision, by=admin_user)
    with pytest.raises(errors.IllegalTransition, match="Vision is archived"):
        actions.approve(QuotaRequest.objects.get(pk=pending.pk), by=admin_user)
    with pytest.raises(ValidationError) as excinfo:
        submit(Team.objects.get(pk=vision.pk), h100, alice)  # as a new web request loads it
    assert excinfo.value.message_dict == {"team": ["Vision is archived and takes no new quota."]}


def _due(teams, flavor, user, admin, count):
    """`count` approved requests spread over `teams`, each to start in a minute."""
    for i in range(count):
        team = teams[i % len(teams)]
        req = submit(team, flavor, user, gpus=1, starts_at=timezone.now() + timedelta(minutes=1))
        actions.approve(req, by=admin)


def test_the_sweep_is_set_based_one_event_per_request_one_mark_per_team(
    admin_user, alice, h100, django_assert_num_queries
):
    from provisioning.models import TeamSync

    teams = [Team.objects.create(name=f"T{i}", slug=f"t{i}") for i in range(3)]
    for team in teams:
        team.memberships.create(user=alice)
    _due(teams, h100, alice, admin_user, 9)
    generations = dict(TeamSync.objects.values_list("team_id", "generation"))
    later = timezone.now() + timedelta(minutes=2)
    # Expiry: savepoint, an empty locked read, release. Activation: savepoint, locked read,
    # one UPDATE, one INSERT of the events, release; and the teams' sync marks in one go
    # (provisioning's set-based callback: savepoint, INSERT of missing rows, UPDATE, release);
    # the notices: the moved rows' names, the webhooks to tell (none here).
    with django_assert_num_queries(3 + 5 + 4 + 2):
        moved = actions.advance_lifecycle(now=later)
    assert moved == {"expired": 0, "activated": 9}
    assert QuotaRequest.objects.filter(status=Status.ACTIVE).count() == 9
    events = AuditEvent.objects.filter(action=QuotaAction.ACTIVATE)
    assert (
        sorted(event.subject.team.slug for event in events) == ["t0"] * 3 + ["t1"] * 3 + ["t2"] * 3
    )
    assert set(events.values_list("from_status", "to_status", "actor")) == {
        ("approved", "active", None)
    }
    after = dict(TeamSync.objects.values_list("team_id", "generation"))
    assert {team_id: after[team_id] - generations[team_id] for team_id in after} == {
        team.pk: 1 for team in teams
    }


def test_the_sweep_moves_many_in_batches(admin_user, alice, vision, h100, monkeypatch):
    monkeypatch.setattr(actions, "SWEEP_BATCH", 4)
    h100.capacity = 100
    h100.save()
    _due([vision], h100, alice, admin_user, 10)
    moved = actions.advance_lifecycle(now=timezone.now() + timedelta(minutes=2))
    assert moved == {"expired": 0, "activated": 10}
    ended = actions.advance_lifecycle(now=timezone.now() + timedelta(days=30))
    assert ended == {"expired": 10, "activated": 0}
    assert AuditEvent.objects.filter(action=QuotaAction.EXPIRE).count() == 10
