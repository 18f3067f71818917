"""State changes of idle policies: every one atomic and audited (docs/idle.md)."""

from django.core.exceptions import ValidationError
from django.db import transaction

from gpu_requests import actions as quota_actions
from gpu_requests.models import AuditEvent
from idle.models import MAX_MINUTES, Exemption, IdleAuditAction, IdlePolicy, Mode

FIELDS = ("idle_minutes", "grace_minutes", "mode", "enabled")


def can_set_policy(user, team):
    """Admins set any policy; a team's managers set their team's (stricter only)."""
    if team is None:
        return quota_actions.can_review(user)
    return quota_actions.can_manage(user, team)


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
    if not can_set_policy(by, team):
        who = "platform admins" if team is None else f"{team.name}'s managers and platform admins"
        raise quota_actions.NotAllowed(f"Only {who} set this idle policy.")
    values = {
        "idle_minutes": idle_minutes,
        "grace_minutes": grace_minutes,
        "mode": mode,
        "enabled": enabled,
    }
    _check_values(values)
    # Locked so that two concurrent changes each audit what they replaced.
    old = IdlePolicy.objects.select_for_update().filter(flavor=flavor, team=team).order_by().first()
    if team is not None:
        base = IdlePolicy.objects.filter(flavor=flavor, team=None).first()
        looser = IdlePolicy(**values).looser_fields(base)
        if looser:
            raise ValidationError(looser)
    before = old.words() if old else "none"
    policy = old or IdlePolicy(flavor=flavor, team=team)
    for field, value in values.items():
        setattr(policy, field, value)
    if before == policy.words():
        return policy
    policy.updated_by = by
    policy.save()
    _audit(policy, IdleAuditAction.POLICY_SET, by, f"{before} -> {policy.words()}")
    return policy


@transaction.atomic
def remove_policy(policy, *, by):
    if not can_set_policy(by, policy.team):
        raise quota_actions.NotAllowed("Only platform admins and the team's managers remove it.")
    policy.delete()
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
    if not quota_actions.can_manage(by, team):
        raise quota_actions.NotAllowed(f"Only {team.name}'s managers and platform admins exempt.")
    if not reason.strip():
        raise ValidationError({"reason": "Say why the workload may stay idle."})
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
