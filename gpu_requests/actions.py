"""Every change of a quota request's state goes through one of these functions.

Each is atomic, moves the status with a compare-and-set UPDATE (so two
people acting at once cannot both win), writes one audit event per
transition and sends its side effects only once the transaction commits.
Views, the API, the Django admin and Celery tasks all call these.
"""

from datetime import timedelta
from decimal import Decimal

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from cluster.capacity import capacity_of
from cluster.models import CapacityAction, Flavor
from gpu_requests import capacity, notices
from gpu_requests.models import Comment, QuotaAction, QuotaRequest, estimate_cost
from teams import access, hooks, inputs
from teams.errors import ActionError, IllegalTransition, NotAllowed
from teams.inputs import MAX_TEXT_LENGTH
from teams.models import AuditEvent

Status = QuotaRequest.Status
Action = QuotaAction

# A request may start this far in the past: "now" typed into a form is a
# few seconds old by the time it is submitted.
START_GRACE = timedelta(minutes=5)
# Quota is planned a year ahead at most, for a year at most: longer holds are
# asked for again, which keeps every estimate within the cost column.
MAX_LEAD = MAX_PERIOD = timedelta(days=366)
MAX_COST = Decimal(10) ** 12  # QuotaRequest.estimated_cost holds 12 digits before the point


class CapacityExceeded(ActionError):
    def __init__(self, flavor, peak, gpus, capacity):
        self.flavor, self.peak, self.gpus, self.capacity = flavor, peak, gpus, capacity
        super().__init__(
            f"Not enough {flavor.name} capacity: {peak} of {capacity} GPUs are already "
            f"reserved at the busiest moment of this period, so {gpus} more would need "
            f"{peak + gpus}."
        )

    def body(self):
        return {"flavor": self.flavor.slug, "peak": self.peak, "capacity": self.capacity,
                "requested": self.gpus}  # fmt: skip


def record_capacity_change(flavor, old, gpus, *, by, reason):
    """cluster.capacity.change_capacity's audit event (no team), old and new in the reason."""
    AuditEvent.objects.create(
        team=None,
        subject_type=ContentType.objects.get_for_model(Flavor),
        subject_id=str(flavor.pk),
        action=CapacityAction.CHANGE_CAPACITY,
        actor=by,
        reason=f"{flavor.name}: {old} -> {gpus} GPUs" + (f". {reason}" if reason else ""),
    )


def can_cancel(user, quota_request):
    """The requester and the team's managers; admins reject or revoke instead."""
    if quota_request.requested_by_id == user.pk:
        return True
    return access.is_manager(user, quota_request.team)


def can_end_early(user, quota_request):
    """The requester, the team's managers and platform admins give quota back: the
    team's members use it, and someone who answers for it decides to end it."""
    return access.can_review(user) or can_cancel(user, quota_request)


_DENIED = {
    Action.APPROVE: "Only platform admins can approve quota requests.",
    Action.REJECT: "Only platform admins can reject quota requests.",
    Action.CANCEL: "Only the requester or a team manager can cancel this request.",
    Action.REVOKE: "Only platform admins can revoke quota.",
    Action.END_EARLY: "Only the requester, a team manager or a platform admin can end "
    "this quota early.",
}

_MAY = {Action.CANCEL: can_cancel, Action.END_EARLY: can_end_early}


def require(action, user, quota_request):
    """Raise NotAllowed unless `user` may take `action` (approve, reject, cancel,
    revoke or end early) on `quota_request`. The API asks before it reads the reason, so someone
    without the right is told so whatever they sent."""
    may = _MAY.get(action)
    if not (may(user, quota_request) if may else access.can_review(user)):
        raise NotAllowed(_DENIED[action])


def _event(quota_request, action, from_status, to_status, actor=None, reason=""):
    """An unsaved audit event of the request (`.save()` it, or several in one INSERT)."""
    return AuditEvent(
        team_id=quota_request.team_id,
        subject=quota_request,
        action=action,
        from_status=from_status,
        to_status=to_status,
        actor=actor,
        reason=reason,
    )


def _lock(quota_request, *, of=("self",)):
    """Read the request again, its row locked until the transaction ends (and those of
    the relations `of` names: an approval locks its flavor's too), with its team,
    flavor and requester: its status is as it is now, and whoever calls an action may
    hand it a bare `QuotaRequest(pk=...)` (the API does, for reviewers). One query;
    QuotaRequest.DoesNotExist if it is not there."""
    quota_request.refresh_from_db(
        from_queryset=QuotaRequest.objects.select_for_update(of=of).select_related(
            "team", "flavor", "requested_by"
        )
    )


def _illegal(quota_request, allowed_from, action):
    allowed = " or ".join(Status(s).label.lower() for s in allowed_from)
    return IllegalTransition(
        f"Request #{quota_request.pk} is {Status(quota_request.status).label.lower()}; "
        f"only {allowed} requests can be {Action(action).label.lower()}."
    )


def _move(quota_request, *, to, allowed_from, action, actor=None, reason="", changes=None):
    """Move the status if it is one of `allowed_from`, or raise IllegalTransition;
    `changes` ({field: value}) are set in the same UPDATE.

    The row is locked first, so the audit event names the status it really
    left, and the UPDATE is still a compare-and-set on that status.
    """
    _lock(quota_request)
    if quota_request.status not in allowed_from:
        raise _illegal(quota_request, allowed_from, action)
    now = timezone.now()
    fields = changes or {}
    QuotaRequest.objects.filter(pk=quota_request.pk, status=quota_request.status).update(
        status=to, updated_at=now, **fields
    )
    for name, value in fields.items():
        setattr(quota_request, name, value)
    quota_request.updated_at = now
    from_status = quota_request.status
    quota_request.status = to
    event = _event(quota_request, action, from_status, to, actor, reason)
    event.save()
    # Only a change of reserved quota concerns the cluster: a rejected or
    # cancelled request leaves it as it was.
    if from_status in QuotaRequest.RESERVING or to in QuotaRequest.RESERVING:
        hooks.quota_changed(quota_request.team_id)
    return event


def validate_request(*, team, flavor, gpus, starts_at, ends_at, justification, by, now=None):
    """Field errors for a new request, as a dict of lists (empty when valid)."""
    now = now or timezone.now()
    errors = {}
    if team is not None and not access.can_see(by, team):
        errors["team"] = ["You are not a member of this team."]
    elif team is not None and team.is_archived:
        errors["team"] = [f"{team.name} is archived and takes no new quota."]
    if flavor is not None and not flavor.is_active:
        errors["flavor"] = [f"{flavor.name} is no longer offered."]
    if gpus is not None:
        if gpus < 1:
            errors["gpus"] = ["Ask for at least 1 GPU."]
        elif flavor is not None and gpus > capacity_of(flavor):
            errors["gpus"] = [
                f"The cluster has {capacity_of(flavor)} {flavor.name} in all; "
                f"ask for at most that many."
            ]
    if starts_at is not None:
        if starts_at < now - START_GRACE:
            errors["starts_at"] = ["The start is in the past."]
        elif starts_at > now + MAX_LEAD:
            errors["starts_at"] = ["The start must be within a year from now."]
        if ends_at is not None and ends_at <= starts_at:
            errors["ends_at"] = ["The end must be after the start."]
        elif ends_at is not None and ends_at - starts_at > MAX_PERIOD:
            errors["ends_at"] = ["A request covers at most 366 days; ask again to extend it."]
    if justification is not None and len(justification) > MAX_TEXT_LENGTH:
        errors["justification"] = [f"Keep the justification to {MAX_TEXT_LENGTH:,} characters."]
    elif justification is not None and inputs.has_hidden_characters(justification):
        errors["justification"] = [inputs.HIDDEN_MESSAGE + "."]
    return errors


def validate_follow_up(follows, *, team, flavor):
    """Errors for a request that follows `follows` (more time or more GPUs), as a dict."""
    if follows.status not in QuotaRequest.RESERVING:
        return {"follows": [f"Request #{follows.pk} is not approved or active any more."]}
    if team is not None and team.pk != follows.team_id:
        return {"team": [f"A follow-up of #{follows.pk} is for {follows.team.name}."]}
    if flavor is not None and flavor.pk != follows.flavor_id:
        return {"flavor": [f"A follow-up of #{follows.pk} is for {follows.flavor.name}."]}
    return {}


@transaction.atomic
def submit(
    *, team, flavor, gpus, starts_at, ends_at, justification, by, follows=None, follow_kind=""
):
    """A new pending request; `follows` links it to approved or active quota it extends
    (`follow_kind` says how), and both requests' histories show the link."""
    if follows is not None:
        follows = (
            QuotaRequest.objects.select_for_update()
            .select_related("team", "flavor")
            .get(pk=follows.pk)
        )
        errors = validate_follow_up(follows, team=team, flavor=flavor)
        if errors:
            raise ValidationError(errors)
    errors = validate_request(
        team=team,
        flavor=flavor,
        gpus=gpus,
        starts_at=starts_at,
        ends_at=ends_at,
        justification=justification,
        by=by,
    )
    if errors:
        raise ValidationError(errors)
    cost = estimate_cost(gpus, starts_at, ends_at, flavor.price_per_gpu_hour)
    if cost is not None and cost >= MAX_COST:
        raise ValidationError({"gpus": ["The estimated cost is too large; ask for less."]})
    quota_request = QuotaRequest.objects.create(
        team=team,
        flavor=flavor,
        gpus=gpus,
        starts_at=starts_at,
        ends_at=ends_at,
        justification=justification,
        requested_by=by,
        estimated_cost=cost,
        follows=follows,
        follow_kind=follow_kind if follows is not None else "",
    )
    kind = QuotaRequest.FollowKind(follow_kind).label.lower() if follows is not None else ""
    asks = f"Asks for {kind} on #{follows.pk}" if follows is not None else ""
    _event(quota_request, Action.SUBMIT, "", Status.PENDING, by, asks).save()
    if follows is not None:
        AuditEvent.record(
            team_id=follows.team_id,
            subject=follows,
            action=Action.FOLLOW_UP,
            actor=by,
            reason=f"#{quota_request.pk} asks for {kind}",
            from_status=follows.status,
            to_status=follows.status,
        )
    notices.submitted(quota_request)  # the email after commit, the webhooks' deliveries now
    return quota_request


@transaction.atomic
def approve(quota_request, *, by, reason=""):
    require(Action.APPROVE, by, quota_request)
    now = timezone.now()
    # Lock the flavor and the request in one statement: approvals of one flavor
    # queue up here, so the capacity check and the status change below see every
    # earlier approval, and the status read is the request's as it is now.
    _lock(quota_request, of=("self", "flavor"))
    flavor = quota_request.flavor
    if quota_request.status != Status.PENDING:
        raise _illegal(quota_request, [Status.PENDING], Action.APPROVE)
    if quota_request.ends_at is not None and quota_request.ends_at <= now:
        raise IllegalTransition(f"Request #{quota_request.pk}'s period has already ended.")
    if quota_request.team.is_archived:
        raise IllegalTransition(f"{quota_request.team.name} is archived and takes no new quota.")
    # Quota requests and whatever other apps reserve (batch windows): one query per source.
    peak = capacity.peak_reserved(
        flavor, quota_request.starts_at, quota_request.ends_at, exclude=quota_request
    )
    total = capacity_of(flavor)
    if peak + quota_request.gpus > total:
        raise CapacityExceeded(flavor, peak, quota_request.gpus, total)
    # A request whose period has begun goes straight on to active: one UPDATE (a
    # compare-and-set, under the lock above) and one INSERT of both its events, so
    # the history still reads approved, then activated.
    started = quota_request.starts_at <= now
    to = Status.ACTIVE if started else Status.APPROVED
    QuotaRequest.objects.filter(pk=quota_request.pk, status=Status.PENDING).update(
        status=to, updated_at=now
    )
    quota_request.updated_at = now
    decision = _event(quota_request, Action.APPROVE, Status.PENDING, Status.APPROVED, by, reason)
    events = [decision]
    if started:
        events.append(_event(quota_request, Action.ACTIVATE, Status.APPROVED, Status.ACTIVE))
    AuditEvent.objects.bulk_create(events)
    hooks.quota_changed(quota_request.team_id)
    quota_request.status = Status.APPROVED  # what the decision's notice tells
    notices.decided(quota_request, decision)
    quota_request.status = to
    return quota_request


@transaction.atomic
def reject(quota_request, *, by, reason=""):
    require(Action.REJECT, by, quota_request)
    decision = _move(
        quota_request,
        to=Status.REJECTED,
        allowed_from=[Status.PENDING],
        action=Action.REJECT,
        actor=by,
        reason=reason,
    )
    notices.decided(quota_request, decision)
    return quota_request


@transaction.atomic
def cancel(quota_request, *, by, reason=""):
    require(Action.CANCEL, by, quota_request)
    _move(
        quota_request,
        to=Status.CANCELLED,
        allowed_from=[Status.PENDING],
        action=Action.CANCEL,
        actor=by,
        reason=reason,
    )
    return quota_request


@transaction.atomic
def revoke(quota_request, *, by, reason=""):
    require(Action.REVOKE, by, quota_request)
    decision = _move(
        quota_request,
        to=Status.REVOKED,
        allowed_from=list(QuotaRequest.RESERVING),
        action=Action.REVOKE,
        actor=by,
        reason=reason,
    )
    notices.decided(quota_request, decision)
    return quota_request


@transaction.atomic
def end_early(quota_request, *, by, reason=""):
    """Give active quota back: its period ends now, so it expires at once (one UPDATE
    of status and end, a compare-and-set under the row's lock), the namespace's
    ResourceQuota shrinks (the quota-changed hook) and the capacity is free for
    others. The audit event keeps the end it had."""
    require(Action.END_EARLY, by, quota_request)
    _lock(quota_request)  # the end it had, as it is now (_move reads it again: locked)
    now = timezone.now()
    if quota_request.status == Status.ACTIVE and quota_request.starts_at >= now:
        raise IllegalTransition(f"Request #{quota_request.pk} has not started yet.")
    was = f"{quota_request.ends_at:%Y-%m-%d %H:%M} UTC" if quota_request.ends_at else "open-ended"
    event = _move(
        quota_request,
        to=Status.EXPIRED,
        allowed_from=[Status.ACTIVE],
        action=Action.END_EARLY,
        actor=by,
        reason=f"Given back (was until {was})" + (f". {reason}" if reason else ""),
        # Never later than it was: the sweep may not have expired a request just ended.
        changes={"ends_at": min(now, quota_request.ends_at or now)},
    )
    notices.ended_early(quota_request, event)
    return quota_request


@transaction.atomic
def activate(quota_request):
    _move(quota_request, to=Status.ACTIVE, allowed_from=[Status.APPROVED], action=Action.ACTIVATE)
    return quota_request


@transaction.atomic
def expire(quota_request):
    _move(
        quota_request,
        to=Status.EXPIRED,
        allowed_from=list(QuotaRequest.RESERVING),
        action=Action.EXPIRE,
    )
    return quota_request


# Due requests move this many at a time: one transaction, four statements
# and the teams' sync marks (set-based too), whatever the batch holds.
SWEEP_BATCH = 500


def advance_lifecycle(now=None):
    """Expire reserving requests that have ended and activate approved ones that started.

    Set-based: each batch is one transaction that locks the due rows (skipping
    rows another transaction holds: the next sweep takes them), moves them
    with one UPDATE, writes one audit event per request with one INSERT and
    marks each team concerned once. Expiry goes first, so a request whose
    whole period passed unseen expires without being activated.
    """
    now = now or timezone.now()
    due = [
        ("expired", QuotaRequest.objects.reserving().filter(ends_at__lte=now), Action.EXPIRE),
        (
            "activated",
            QuotaRequest.objects.filter(status=Status.APPROVED, starts_at__lte=now),
            Action.ACTIVATE,
        ),
    ]
    moved = {}
    for key, rows, action in due:
        moved[key] = 0
        while True:
            count = _move_due(rows, action=action)
            moved[key] += count
            if count < SWEEP_BATCH:
                break
    return moved


_SWEEP_TARGET = {Action.EXPIRE: Status.EXPIRED, Action.ACTIVATE: Status.ACTIVE}


@transaction.atomic
def _move_due(rows, *, action):
    """Move up to SWEEP_BATCH of `rows` by `action`; how many moved. Four queries,
    what the quota-changed callbacks write for all the teams at once, and the
    notices (a query for the rows' names, and what the channels write)."""
    to = _SWEEP_TARGET[action]
    locked = list(
        rows.select_for_update(skip_locked=True)
        .order_by("pk")
        .values_list("pk", "team_id", "status")[:SWEEP_BATCH]
    )
    if not locked:
        return 0
    # The rows are locked: their status is still the one read above.
    QuotaRequest.objects.filter(pk__in=[pk for pk, _, _ in locked]).update(
        status=to, updated_at=timezone.now()
    )
    request_type = ContentType.objects.get_for_model(QuotaRequest)  # cached after the first
    AuditEvent.objects.bulk_create(
        AuditEvent(
            team_id=team_id,
            subject_type=request_type,
            subject_id=str(pk),
            action=action,
            from_status=from_status,
            to_status=to,
        )
        for pk, team_id, from_status in locked
    )
    hooks.quota_changed_many(team_id for _, team_id, _ in locked)
    notices.moved_by_sweep([pk for pk, _, _ in locked], to)
    return len(locked)


def team_archived(team, *, by, reason):
    """An archived team's reserved quota is revoked, each request with its own event
    and notice (`teams.actions.archive_team`'s hook, in its transaction)."""
    for quota_request in QuotaRequest.objects.reserving().filter(team=team):
        revoke(quota_request, by=by, reason=reason)


# Comments

MAX_COMMENT = 4000


def can_comment(user, quota_request):
    """The requester, the team's managers and the reviewers talk on a request."""
    if quota_request.requested_by_id == user.pk:
        return True
    return access.can_manage(user, quota_request.team)


@transaction.atomic
def comment(quota_request, *, by, body):
    """Add a comment; the others in the thread (requester, managers who are in it,
    reviewers who are, or all reviewers while nobody reviewing has spoken) get it by mail;
    the team's and the admins' webhooks get it too."""
    if not can_comment(by, quota_request):
        raise NotAllowed("Only the requester, the team's managers and reviewers comment here.")
    body = body.strip()
    if not body:
        raise ValidationError({"body": ["Write something first."]})
    if len(body) > MAX_COMMENT or "\x00" in body:
        raise ValidationError({"body": [f"Keep a comment to {MAX_COMMENT:,} characters of text."]})
    if inputs.has_hidden_characters(body):
        raise ValidationError({"body": [inputs.HIDDEN_MESSAGE + "."]})
    note = Comment.objects.create(quota_request=quota_request, author=by, body=body)
    AuditEvent.record(
        team_id=quota_request.team_id,
        subject=quota_request,
        action=Action.COMMENT,
        actor=by,
        reason=body[:200],
        from_status=quota_request.status,
        to_status=quota_request.status,
    )
    notices.commented(note)
    return note
