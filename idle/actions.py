"""State changes of idle policies: every one atomic and audited (docs/idle.md)."""

import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from batch import watch
from batch.models import BatchJob
from billing.rates import RateCard
from cluster import clock, kube
from cluster.models import Flavor
from idle import emails, evaluation, workloads
from idle.models import (
    MAX_EXEMPTION,
    MAX_MINUTES,
    Exemption,
    IdleAction,
    IdleAuditAction,
    IdlePolicy,
    IdleState,
    Mode,
    effective,
)
from teams import access, errors, hooks, inputs
from teams.formats import gpu_hours, money
from teams.inputs import MAX_TEXT_LENGTH
from teams.models import AuditEvent, Team
from teams.namespaces import namespace_of
from teams.notices import Notice, absolute

FIELDS = ("idle_minutes", "grace_minutes", "mode", "enabled")


def _check_values(values):
    errors = {}
    idle, grace = values["idle_minutes"], values["grace_minutes"]
    if isinstance(idle, bool) or not isinstance(idle, int) or not 1 <= idle <= MAX_MINUTES:
        errors["idle_minutes"] = f"Give a whole number of minutes from 1 to {MAX_MINUTES}."
    if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= MAX_MINUTES:
        errors["grace_minutes"] = f"Give a whole number of minutes from 0 to {MAX_MINUTES}."
    if values["mode"] not in Mode.values:
        errors["mode"] = f"Give one of {', '.join(Mode.values)}."
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def set_policy(flavor, team, *, by, idle_minutes, grace_minutes, mode=Mode.REPORT, enabled=True):
    """Create or change the policy of `flavor` (for `team`, or for every team when
    None). A team's policy may not be looser than its flavor's; a flavor's policy
    made stricter than a team's still wins field by field (`models.effective`)."""
    # Admins set any policy (team None: every team's); a team's managers set
    # their team's, stricter only.
    if not access.can_manage(by, team):
        who = "platform admins" if team is None else f"{team.name}'s managers and platform admins"
        raise errors.NotAllowed(f"Only {who} set this idle policy.")
    values = {
        "idle_minutes": idle_minutes,
        "grace_minutes": grace_minutes,
        "mode": mode,
        "enabled": enabled,
    }
    _check_values(values)
    try:
        with transaction.atomic():
            return _write_policy(flavor, team, values, by)
    except IntegrityError:
        # Two first saves at once: both found no row to lock, and the unique
        # constraint refused the second INSERT after the first committed. That
        # row is there now: this one changes it, as if it had come second.
        return _write_policy(flavor, team, values, by)


def _write_policy(flavor, team, values, by):
    # Locked so that two concurrent changes each audit what they replaced.
    old = IdlePolicy.objects.select_for_update().filter(flavor=flavor, team=team).order_by().first()
    if team is not None:
        base = IdlePolicy.objects.filter(flavor=flavor, team=None).first()
        looser = IdlePolicy(**values).looser_fields(base)
        if looser:
            raise ValidationError(looser)
    before = old.words() if old else "none"
    policy = old or IdlePolicy(flavor=flavor, team=team)
    for name, value in values.items():
        setattr(policy, name, value)
    if before == policy.words():
        return policy
    policy.updated_by = by
    policy.save()
    _audit(policy, IdleAuditAction.POLICY_SET, by, f"{before} -> {policy.words()}")
    return policy


@transaction.atomic
def remove_policy(policy, *, by):
    if not access.can_manage(by, policy.team):
        raise errors.NotAllowed("Only platform admins and the team's managers remove it.")
    # Compare-and-set: of two removals at once, the second deletes nothing and is
    # told so (one audit event).
    if not IdlePolicy.objects.filter(pk=policy.pk).delete()[0]:
        raise errors.IllegalTransition("This idle policy was already removed.")
    _audit(policy, IdleAuditAction.POLICY_REMOVE, by, f"{policy.words()} -> none")


def _audit(policy, action, by, change):
    scope = policy.team.slug if policy.team_id else "every team"
    AuditEvent.record(
        team_id=policy.team_id,
        action=action,
        actor=by,
        reason=f"{policy.flavor.slug} ({scope}): {change}",
    )


@transaction.atomic
def exempt(team, *, namespace, kind, name, until, reason, by):
    """Leave a workload of `team` alone until `until`, with a reason: its managers
    and platform admins. Audited on the team."""
    if not access.can_manage(by, team):
        raise errors.NotAllowed(f"Only {team.name}'s managers and platform admins exempt.")
    problems = {}
    if not reason.strip():
        problems["reason"] = "Say why the workload may stay idle."
    elif len(reason) > MAX_TEXT_LENGTH or "\x00" in reason:
        problems["reason"] = f"Keep the reason to {MAX_TEXT_LENGTH:,} characters of text."
    elif inputs.has_hidden_characters(reason):
        problems["reason"] = inputs.HIDDEN_MESSAGE + "."
    if namespace != (own := namespace_of(team.slug)):
        problems["namespace"] = f"{team.name}'s workloads are in namespace {own}."
    now = clock.now()
    if until <= now:
        problems["until"] = "Give a time in the future."
    elif until > now + MAX_EXEMPTION:
        problems["until"] = f"Exempt for at most {MAX_EXEMPTION.days} days from now."
    if problems:
        raise ValidationError(problems)
    exemption = Exemption.objects.create(
        team=team,
        namespace=namespace,
        kind=kind,
        name=name,
        until=until,
        reason=reason,
        created_by=by,
    )
    AuditEvent.record(
        team_id=team.pk,
        action=IdleAuditAction.EXEMPT,
        actor=by,
        subject=exemption,
        reason=f"{kind} {namespace}/{name} until {until:%Y-%m-%d %H:%M} UTC: {reason}",
    )
    return exemption


# --- evaluation: every minute from beat (task idle.evaluate) ---


def policies_in_force():
    """{(flavor id, team id or None): IdlePolicy} of the enabled policies. One query."""
    return {(p.flavor_id, p.team_id): p for p in IdlePolicy.objects.filter(enabled=True)}


def policy_for(flavor_id, team_id):
    """The policy in force for a team's workloads of a flavor, or None. One query."""
    return _policy_for(policies_in_force(), flavor_id, team_id)


def _policy_for(policies, flavor_id, team_id):
    return effective(policies.get((flavor_id, None)), policies.get((flavor_id, team_id)))


@dataclass
class Evaluation:
    """What one run did, for the task's log line and the tests."""

    workloads: int = 0
    idle: int = 0
    announced: list = field(default_factory=list)
    withdrawn: list = field(default_factory=list)
    acted: list = field(default_factory=list)
    # For after the transaction: states whose scale-to-zero was decided.
    to_scale: list = field(default_factory=list)


def evaluate(now=None):
    """Read every GPU workload's activity (two PromQL queries), keep each one's idle
    state, announce, withdraw and act as the policies say. Idempotent per minute:
    each step is taken once, recorded in its IdleState row."""
    now = now or clock.now()
    flavors = list(Flavor.objects.all())
    observed = evaluation.observe(flavors, at=now)
    return apply_observations(observed, flavors, now)


def apply_observations(observed, flavors, now):
    """`observed` ({key: evaluation.Workload}) as of `now` against the policies,
    states and exemptions. The cluster is never called inside the transaction that
    decides, and nothing read from it decides: an exemption is a manager's row
    (`exempt`), never an annotation a member could write. A scale-to-zero decided
    is committed first (its state's `acted_at`), then made, then its outcome
    recorded."""
    result = _decide(observed, flavors, now)
    for state in result.to_scale:
        _scale_to_zero(state, now)
    return result


@transaction.atomic
def _decide(observed, flavors, now):
    """The database half: every workload's state moved on by the policies and the
    exemptions in force."""
    result = Evaluation(workloads=len(observed))
    threshold = float(settings.PORTAL_BILLING_IDLE_THRESHOLD)
    teams = {namespace_of(team.slug): team for team in Team.objects.filter(archived_at=None)}
    by_id = {flavor.pk: flavor for flavor in flavors}
    policies = policies_in_force()
    states = {
        (s.namespace, s.kind, s.name): s for s in IdleState.objects.select_for_update().order_by()
    }
    exempt = set(Exemption.objects.filter(until__gt=now).values_list("namespace", "kind", "name"))
    created, stalled = [], []
    for key, workload in observed.items():
        state = states.pop(key, None)
        if workload.activity >= threshold:
            # Busy, the common case: nothing kept, nothing written.
            if state is not None:
                _active_again(state, now, result, "it is active again")
                state.delete()
            continue
        team = teams.get(workload.namespace)
        flavor = by_id.get(workload.flavor_id)
        if team is None or flavor is None:
            continue
        result.idle += 1
        if state is None:
            state = IdleState(
                team=team, flavor=flavor, namespace=key[0], kind=key[1], name=key[2], seen_at=now
            )
        before = _fields(state)
        state.gpus, state.idle_since = workload.gpus, state.idle_since or now
        policy = _policy_for(policies, flavor.pk, team.pk)
        if policy is None or key in exempt:
            _active_again(state, now, result, "it is exempt", idle=True)
        else:
            _step(state, policy, now, result)
            if policy.mode == Mode.ACT and _unfinished(state, now):
                stalled.append(state)
        if state.pk is None:
            created.append(state)
        elif _fields(state) != before:
            state.seen_at = now
            state.save()
    IdleState.objects.bulk_create(created)  # one INSERT for the newly idle
    result.to_scale += _never_made(stalled)
    # Workloads no longer holding GPUs: those acted on stay (a scale-down is
    # undone by "Bring it back"), the rest are forgotten.
    for state in states.values():
        if state.acted_at is None or state.kind == "Pod":
            _active_again(state, now, result, "it is gone")
            state.delete()
    return result


# A scale-down decided this long ago whose workload still holds its GPUs and whose
# outcome was never recorded: the worker died between the commit and the PATCH.
UNFINISHED_AFTER = timedelta(minutes=5)


def _unfinished(state, now):
    return (
        state.kind in workloads.SCALABLE
        and state.acted_at is not None
        and now - state.acted_at >= UNFINISHED_AFTER
    )


def _never_made(states):
    """Of `states` (decided a while ago, still running), those with no scale-down
    (or report-only entry) logged since the decision: to be made again (`workloads.scale_to_zero`
    is idempotent; a failure resets the decision). One query."""
    if not states:
        return []
    made = set(
        IdleAction.objects.filter(
            # (Report-only decided "would act": the policy switched to act since.)
            kind__in=(IdleAction.Kind.SCALED_TO_ZERO, IdleAction.Kind.WOULD_ACT),
            at__gte=min(state.acted_at for state in states),
            namespace__in={state.namespace for state in states},
        ).values_list("namespace", "workload_kind", "workload_name", "at")
    )
    return [
        state
        for state in states
        if not any(
            (ns, kind, name) == (state.namespace, state.kind, state.name) and at >= state.acted_at
            for ns, kind, name, at in made
        )
    ]


def _fields(state):
    return (state.gpus, state.idle_since, state.announced_at, state.action_due_at, state.acted_at)


def _step(state, policy, now, result):
    if state.announced_at is None:
        if now - state.idle_since < timedelta(minutes=policy.idle_minutes):
            return
        state.announced_at = now
        state.action_due_at = now + timedelta(minutes=policy.grace_minutes)
        _log(state, IdleAction.Kind.ANNOUNCED, policy.mode, now)
        _notice(state, "idle_announced", _announce_title(state, policy), now)
        result.announced.append(state)
    if state.acted_at is None and now >= state.action_due_at:
        state.acted_at = now
        if policy.mode == Mode.REPORT:
            _log(state, IdleAction.Kind.WOULD_ACT, Mode.REPORT, now, detail=_would(state))
        else:
            _act(state, now, result)
        result.acted.append(state)
    elif (
        state.kind == "Pod"
        and policy.mode == Mode.ACT
        and state.acted_at is not None
        and now - state.acted_at >= timedelta(minutes=settings.PORTAL_IDLE_REMIND_MINUTES)
    ):
        state.acted_at = now
        _remind(state, now)


def _active_again(state, now, result, why, idle=False):
    """Left alone: the notice (if any) withdrawn, a report-only saving closed."""
    if state.announced_at is not None and (state.acted_at is None or state.kind == "Pod"):
        _log(state, IdleAction.Kind.WITHDRAWN, "", now, detail=f"Notice withdrawn: {why}.")
        _notice(state, "idle_withdrawn", f"{_name(state)}: idle notice withdrawn, {why}", now)
        result.withdrawn.append(state)
    if state.acted_at is not None:  # only then are there rows giving GPUs back
        _close_open(state, now)
    if not idle:
        state.idle_since = None
    state.announced_at = state.action_due_at = state.acted_at = None
    state.previous_replicas = None  # of a scale-down no longer in force


def _close_open(state, now):
    """End the workload's open rows that give GPUs back (a scale-down, a suspension,
    a report-only "would have"): the GPU-hours stop counting. Few rows."""
    for row in IdleAction.objects.select_for_update().filter(
        namespace=state.namespace,
        workload_kind=state.kind,
        workload_name=state.name,
        kind__in=IdleAction.GIVES_BACK,
        ended_at=None,
    ):
        row.ended_at = now
        row.gpu_seconds = int(row.gpus * max((now - row.at).total_seconds(), 0))
        row.save(update_fields=["ended_at", "gpu_seconds"])


ACTION_WORDS = {
    "Job": "suspend the job and return it to the queue",
    "Deployment": "scale it to zero (Bring it back restores it)",
    "StatefulSet": "scale it to zero (Bring it back restores it)",
    "Pod": "nothing (a bare pod is never deleted): its team is reminded",
}


def _action_words(kind):
    return ACTION_WORDS.get(kind, "nothing (a workload of this kind is not acted on)")


def _name(state):
    return f"{state.kind} {state.namespace}/{state.name}"


def _announce_title(state, policy):
    if policy.mode == Mode.REPORT:
        return f"{_name(state)} is idle (report only: nothing will be done)"
    return (
        f"{_name(state)} is idle: at {state.action_due_at:%Y-%m-%d %H:%M} UTC the portal will "
        + (_action_words(state.kind))
    )


def _would(state):
    return f"Would {_action_words(state.kind)}; {state.gpus} GPU(s) given back while it stays idle."


def _act(state, now, result):
    if state.kind == "Pod":
        _remind(state, now)
        return
    if state.kind == "Job" and (job := _batch_job(state)) is not None:
        reason = f"Idle since {state.idle_since:%Y-%m-%d %H:%M} UTC past its grace: requeued."
        if watch.requeue_idle(job.pk, reason) is not None:
            _log(state, IdleAction.Kind.SUSPENDED, Mode.ACT, now, detail=reason)
            title = f"Batch job #{job.pk} {job.name} was idle: back in the queue"
            _notice(state, "idle_requeued", title, now, recipients=[job.created_by.email])
            return
    if state.kind in workloads.SCALABLE:
        result.to_scale.append(state)  # decided (acted_at): made after the commit
        return
    # Step 4 (the actions by kind) is not built yet: until it is, a policy in
    # act mode logs what it would do, as report-only does.
    _log(state, IdleAction.Kind.WOULD_ACT, Mode.ACT, now, detail=_would(state))


def _scale_to_zero(state, now):
    """Carry out a scale-to-zero decided and committed by `_decide`, then record
    the outcome in a transaction of its own: the log row and the notice, or the
    failure (logged once, not every minute) and the decision undone, so the next
    minute tries again.

    The replicas it runs are read (one GET) and recorded on its state before the
    PATCH: "Bring it back" restores what the database says, never an annotation.
    Found at zero already (a scale-down made by a worker that died before its
    outcome was recorded): the count recorded then, nothing written."""
    try:
        previous = workloads.replicas(state.kind, state.namespace, state.name)
        if previous == 0:
            previous = state.previous_replicas or 0
        else:
            IdleState.objects.filter(pk=state.pk, acted_at=state.acted_at).update(
                previous_replicas=previous
            )
            workloads.scale_to_zero(state.kind, state.namespace, state.name, previous=previous)
    except (kube.ClusterError, workloads.NotThere) as exc:
        detail = str(exc)[:500]
        with transaction.atomic():
            IdleState.objects.filter(
                namespace=state.namespace, kind=state.kind, name=state.name, acted_at=state.acted_at
            ).update(acted_at=None)
            last = (
                IdleAction.objects.filter(
                    namespace=state.namespace, workload_kind=state.kind, workload_name=state.name
                )
                .values_list("kind", "detail")
                .first()
            )
            if last != (IdleAction.Kind.FAILED, detail):
                _log(state, IdleAction.Kind.FAILED, Mode.ACT, now, detail=detail)
        return
    detail = f"Scaled to zero from {previous} replica(s); Bring it back restores them."
    with transaction.atomic():
        _log(state, IdleAction.Kind.SCALED_TO_ZERO, Mode.ACT, now, detail=detail)
        _notice(state, "idle_scaled_to_zero", f"{_name(state)} was scaled to zero (idle)", now)


def _batch_job(state):
    """The portal's batch job behind a Job named batch-<id> in the team's namespace."""
    match = re.fullmatch(r"batch-(\d+)", state.name)
    if match is None:
        return None
    return (
        BatchJob.objects.select_related("created_by")
        .filter(pk=int(match.group(1)), team_id=state.team_id)
        .first()
    )


def _remind(state, now):
    """A bare pod is never deleted: its team (managers included) is told again,
    with what its idle time has cost so far."""
    hours = Decimal((now - state.idle_since).total_seconds()) / 3600 * state.gpus
    price = RateCard().price(state.flavor_id, now)
    cost = money(hours * price) if price is not None else "no price on the rate card"
    detail = f"Idle {gpu_hours(hours)} GPU-hours so far, costing {cost}."
    _log(state, IdleAction.Kind.REMINDED, Mode.ACT, now, detail=detail)
    title = f"{_name(state)} is still idle: {gpu_hours(hours)} GPU-hours, {cost} so far"
    _notice(state, "idle_reminder", title, now, extra=[("Cost so far", cost)])


def _log(state, kind, mode, now, detail=""):
    return IdleAction.objects.create(
        team=state.team,
        flavor=state.flavor,
        namespace=state.namespace,
        workload_kind=state.kind,
        workload_name=state.name,
        kind=kind,
        mode=mode,
        at=now,
        gpus=state.gpus,
        idle_since=state.idle_since,
        action_due_at=state.action_due_at,
        detail=detail,
    )


def _notice(state, event, title, now, extra=(), recipients=None):
    """The team told by webhook (in this transaction) and email (after it): its
    members, or `recipients` (a batch job's submitter)."""
    path = reverse(
        "billing_workload", args=[state.team.slug, state.namespace, state.kind, state.name]
    )
    facts = [("Team", state.team.name), ("GPUs", f"{state.gpus} x {state.flavor.name}")]
    if state.idle_since:
        facts.append(("Idle since", f"{state.idle_since:%Y-%m-%d %H:%M} UTC"))
    if state.action_due_at and event == "idle_announced":
        facts.append(("Action at", f"{state.action_due_at:%Y-%m-%d %H:%M} UTC"))
    facts.extend(extra)
    url = absolute(path)
    hooks.notice(
        Notice(
            event=event,
            team_id=state.team_id,
            title=title,
            url=url,
            facts=tuple(facts),
            data={
                "team": state.team.slug,
                "namespace": state.namespace,
                "kind": state.kind,
                "name": state.name,
                "gpus": state.gpus,
                "action_due_at": state.action_due_at.isoformat() if state.action_due_at else None,
            },
            at=now,
        )
    )
    team_id = state.team_id
    transaction.on_commit(
        lambda: emails.send_notice(team_id, title, url, facts, recipients), robust=True
    )


@transaction.atomic
def bring_back(state, *, by):
    """Restore a workload scaled to zero by an idle action (its team's members and
    admins): the replicas it had, the saving closed, the state forgotten."""
    if not access.can_see(by, state.team):
        raise errors.NotAllowed(f"Only {state.team.name}'s members bring it back.")
    if state.kind not in workloads.SCALABLE or state.acted_at is None:
        raise errors.IllegalTransition(f"{_name(state)} was not scaled to zero.")
    # Compare-and-set: the state is claimed (locked, and still scaled to zero) before
    # the cluster is asked, so of two clicks at once the second waits here, finds
    # it gone and is told so: one restore, one log row, one audit event.
    claimed = IdleState.objects.select_for_update().filter(pk=state.pk, acted_at__isnull=False)
    claimed = claimed.first()
    if claimed is None:
        raise errors.IllegalTransition(f"{_name(state)} was already brought back.")
    if claimed.previous_replicas is None:
        raise errors.IllegalTransition(
            f"{_name(state)}: the portal has no record of the replicas it had; scale it "
            "back with kubectl."
        )
    state.previous_replicas = claimed.previous_replicas
    now = clock.now()
    try:
        replicas = workloads.bring_back(
            state.kind, state.namespace, state.name, replicas=state.previous_replicas
        )
    except workloads.NotThere as exc:
        raise errors.IllegalTransition(f"{exc}: there is nothing to bring back.") from None
    except kube.ClusterError as exc:
        raise errors.Unavailable(f"The cluster did not take it; try again. ({exc})") from None
    _close_open(state, now)
    words = f"{replicas} replica(s)" if replicas is not None else "its owner had scaled it up"
    _log(state, IdleAction.Kind.RESTORED, Mode.ACT, now, detail=f"Brought back by {by}: {words}.")
    AuditEvent.record(
        team_id=state.team_id,
        action=IdleAuditAction.BRING_BACK,
        actor=by,
        reason=f"{_name(state)}: {words}",
    )
    state.delete()
    return replicas
