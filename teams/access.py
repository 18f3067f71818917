"""Who may do what: the access rules every feature asks, one function each."""

from django.contrib.auth.models import Permission

from teams.models import Membership, Team

# What makes a platform admin, held directly or through a group (Team.Meta.permissions).
REVIEW_PERMISSION = "review_requests"


def review_permission():
    """The Permission that makes a platform admin, to grant or take back (a query)."""
    return Permission.objects.get(content_type__app_label="teams", codename=REVIEW_PERMISSION)


def can_review(user):
    """A platform admin: reviews quota requests and sees every team."""
    return user.is_active and user.has_perm(f"teams.{REVIEW_PERMISSION}")


def can_see(user, team):
    """In the team or a platform admin: sees its requests, jobs, spend and
    workloads, and may ask for quota or queue work in it (a query at most)."""
    return can_review(user) or team.memberships.filter(user=user).exists()


def is_manager(user, team):
    """One of the team's managers (a query)."""
    return team.memberships.filter(user=user, role=Membership.Role.MANAGER).exists()


def can_manage(user, team):
    """A team's managers and platform admins manage it: its members, budget,
    webhook, idle policies and exemptions. `team` None is the platform's own
    setting of that kind (the admins' webhook, the default idle policy), which
    only admins manage."""
    if can_review(user):
        return True
    return team is not None and is_manager(user, team)


def teams_for(user):
    """The teams `user` sees: every team for an admin, else their own."""
    if can_review(user):
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user)
