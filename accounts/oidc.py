"""Single sign-on with OpenID Connect (mozilla-django-oidc), configured from
the environment (portal/settings.py, README "Single sign-on").

At every login the user's `groups` claim decides, by the rules in settings,
which teams they are in (and as what) and whether they are a platform admin:
the identity provider is the source of truth, so a group removed there is a
membership removed here at the next login.
"""

import logging
import re
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from teams import access, hooks
from teams.models import Membership, Team

log = logging.getLogger(__name__)


def team_roles(groups):
    """{team slug: role} from group names, by PORTAL_OIDC_TEAM_GROUP_REGEX
    (named groups `team` and, optionally, `role`: "manager" or absent)."""
    pattern = re.compile(settings.PORTAL_OIDC_TEAM_GROUP_REGEX)
    roles = {}
    for group in groups:
        match = pattern.fullmatch(group)
        if not match:
            continue
        role = Membership.Role.MANAGER if match.groupdict().get("role") else Membership.Role.MEMBER
        slug = match.group("team")
        if roles.get(slug) != Membership.Role.MANAGER:  # manager wins over member
            roles[slug] = role
    return roles


@transaction.atomic
def apply_groups(user, groups):
    """Make the user's memberships and admin role what the groups say."""
    groups = [g for g in groups if isinstance(g, str)]
    wanted = team_roles(groups)
    teams = {team.slug: team for team in Team.objects.filter(slug__in=wanted)}
    have = {m.team.slug: m for m in Membership.objects.filter(user=user).select_related("team")}
    changed = set()
    for slug, membership in have.items():
        if slug not in teams:
            membership.delete()
            changed.add(membership.team_id)
        elif membership.role != wanted[slug]:
            membership.role = wanted[slug]
            membership.save(update_fields=["role"])
            changed.add(membership.team_id)
    for slug, team in teams.items():
        if slug not in have:
            Membership.objects.create(team=team, user=user, role=wanted[slug])
            changed.add(team.pk)
    for team_id in sorted(changed):
        hooks.members_changed(team_id)

    admin = bool(set(groups) & set(settings.PORTAL_OIDC_ADMIN_GROUPS))
    review = access.review_permission()
    if admin:
        user.user_permissions.add(review)
    else:
        user.user_permissions.remove(review)
    if user.is_staff != admin and not user.is_superuser:
        user.is_staff = admin
        user.save(update_fields=["is_staff"])
    log.info("user %s signed in: teams %s, admin %s", user.pk, sorted(teams), admin)


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """Users are matched by their provider's username claim, not by e-mail
    (an address can change hands)."""

    def filter_users_by_claims(self, claims):
        username = self.get_username(claims)
        return self.UserModel.objects.filter(username=username)

    def get_username(self, claims):
        return claims.get(settings.PORTAL_OIDC_USERNAME_CLAIM) or claims["sub"]

    def verify_claims(self, claims):
        return bool(claims.get(settings.PORTAL_OIDC_USERNAME_CLAIM) or claims.get("sub"))

    def create_user(self, claims):
        user = self.UserModel.objects.create_user(
            self.get_username(claims), email=claims.get("email", "")
        )
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        name = (claims.get("name") or "").strip()
        first, _, last = name.partition(" ")
        user.email = claims.get("email", user.email)
        user.first_name, user.last_name = first[:150], last[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        apply_groups(user, claims.get("groups") or [])
        return user


def logout_url(request):
    """Where logging out sends the browser: the provider's end-session
    endpoint, so the provider's session ends too (RP-initiated logout)."""
    end = settings.OIDC_OP_LOGOUT_ENDPOINT
    if not end:
        return resolve_url(settings.LOGOUT_REDIRECT_URL)
    query = {
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(resolve_url(settings.LOGIN_URL)),
    }
    id_token = request.session.get("oidc_id_token")
    if id_token:
        query["id_token_hint"] = id_token
    return f"{end}?{urlencode(query)}"
