"""Every change of a team or its members goes through one of these functions.

Each is atomic, checks who may make it (`teams.access`), writes one audit event
and tells the apps above through `teams.hooks`: a change of members re-syncs
the team's RoleBinding, an archived team's quota is revoked by the app that
holds it. Views, the API and the Django admin call these.
"""

from django.db import transaction
from django.utils import timezone

from teams import access, hooks
from teams.errors import IllegalTransition, NotAllowed
from teams.models import AuditEvent, Membership, Team

Action = AuditEvent.Action


def create_team(*, name, slug, by):
    """A new team (its namespace is named after `slug`); the creator is not made a member.

    A slug whose namespace the portal may not take as the team's is a field error
    (`Team.clean`: `teams.namespaces.check_slug`, which reads the namespace on the
    cluster: one API call, made before the transaction)."""
    if not access.can_review(by):
        raise NotAllowed("Only platform admins can create teams.")
    # Team.name's validator (inputs.validate_one_line) refuses line breaks and
    # invisible characters, here as in the admin.
    team = Team(name=name, slug=slug)
    team.full_clean()
    with transaction.atomic():
        team.save()
        AuditEvent.record(team_id=team.pk, action=Action.TEAM_CREATE, actor=by, reason=name)
    return team


@transaction.atomic
def archive_team(team, *, by, reason="Team archived"):
    """Take no more quota and give up what the team holds (the apps above revoke it
    through `hooks.on_team_archived`); its namespace and data stay."""
    if not access.can_review(by):
        raise NotAllowed("Only platform admins can archive teams.")
    now = timezone.now()
    if not Team.objects.filter(pk=team.pk, archived_at__isnull=True).update(archived_at=now):
        raise IllegalTransition(f"{team.name} is already archived.")
    team.archived_at = now
    hooks.team_archived(team, by=by, reason=reason)
    AuditEvent.record(team_id=team.pk, action=Action.ARCHIVE, actor=by, reason=reason)
    # Even with nothing to revoke, the team's cap on the cluster drops to zero.
    hooks.quota_changed(team.pk)
    return team


def _member_event(team, action, *, by, user, reason):
    AuditEvent.record(team_id=team.pk, action=action, actor=by, subject=user, reason=reason)
    # The team's RoleBinding names its members: the layer above re-syncs it.
    hooks.members_changed(team.pk)


def _require_manager(team, by):
    # The team's row is locked first, so that changes of one team's members take
    # turns: two managers removing or demoting each other at once each locked
    # only their own row, both saw the other still a manager, and the team was
    # left with none. The check of who may act comes after the lock, so it reads
    # the roles the change before it left.
    Team.objects.select_for_update().only("pk").filter(pk=team.pk).first()
    if not access.can_manage(by, team):
        raise NotAllowed(f"Only {team.name}'s managers and platform admins manage its members.")
    if team.is_archived:
        raise IllegalTransition(f"{team.name} is archived.")


@transaction.atomic
def add_member(team, user, *, role=Membership.Role.MEMBER, by):
    _require_manager(team, by)
    membership, created = Membership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    if not created:
        raise IllegalTransition(f"{user.username} is already in {team.name}.")
    _member_event(
        team, Action.MEMBER_ADD, by=by, user=user, reason=f"{user.username} as {role.label.lower()}"
    )
    return membership


def _other_managers(team, user):
    return team.memberships.filter(role=Membership.Role.MANAGER).exclude(user=user).exists()


@transaction.atomic
def remove_member(team, user, *, by):
    _require_manager(team, by)
    membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
    if membership is None:
        raise IllegalTransition(f"{user.username} is not in {team.name}.")
    if membership.role == Membership.Role.MANAGER and not _other_managers(team, user):
        raise IllegalTransition(
            f"{user.username} is {team.name}'s last manager; name another first."
        )
    membership.delete()
    _member_event(team, Action.MEMBER_REMOVE, by=by, user=user, reason=user.username)


@transaction.atomic
def set_role(team, user, role, *, by):
    _require_manager(team, by)
    role = Membership.Role(role)
    membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
    if membership is None:
        raise IllegalTransition(f"{user.username} is not in {team.name}.")
    if membership.role == role:
        return membership
    if membership.role == Membership.Role.MANAGER and not _other_managers(team, user):
        raise IllegalTransition(
            f"{user.username} is {team.name}'s last manager; name another first."
        )
    Membership.objects.filter(pk=membership.pk).update(role=role)
    membership.role = role
    _member_event(
        team, Action.ROLE_CHANGE, by=by, user=user, reason=f"{user.username}: {role.label.lower()}"
    )
    return membership
