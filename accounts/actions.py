"""Personal API tokens: made and revoked by their owner. The key is shown
once, at creation; only its digest is kept."""

import logging
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.models import PREFIX, PersonalToken, digest
from teams import inputs

log = logging.getLogger(__name__)

EXPIRY_DAYS = (7, 30, 90, 365)
MAX_ACTIVE = 20


class TokenError(Exception):
    pass


@transaction.atomic
def create_token(user, *, name, days):
    """(token, key): the key exists nowhere else after this returns."""
    if days not in EXPIRY_DAYS:
        raise TokenError(f"Choose an expiry of {', '.join(map(str, EXPIRY_DAYS))} days.")
    name = name.strip()
    if not name or len(name) > 100:
        raise TokenError("Give the token a name of 1 to 100 characters.")
    if inputs.has_control_characters(name):
        raise TokenError(inputs.ONE_LINE_MESSAGE + ".")
    # Lock the user's row: two clicks at once cannot both pass the cap.
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    if PersonalToken.objects.filter(user=user).usable().count() >= MAX_ACTIVE:
        raise TokenError(f"You have {MAX_ACTIVE} active tokens; revoke one first.")
    key = PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    token = PersonalToken.objects.create(
        user=user,
        name=name,
        key_digest=digest(key),
        hint=key[: len(PREFIX) + 4],
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    log.info("personal token %s created by user %s", token.pk, user.pk)
    return token, key


def revoke_token(user, token_id):
    """True if the user's token was active and is now revoked (idempotent)."""
    revoked = PersonalToken.objects.filter(pk=token_id, user=user, revoked_at=None).update(
        revoked_at=timezone.now()
    )
    if revoked:
        log.info("personal token %s revoked by user %s", token_id, user.pk)
    return bool(revoked)


def authenticate(key):
    """The user a key belongs to, or None if unknown, expired or revoked."""
    now = timezone.now()
    token = (
        PersonalToken.objects.usable(now)
        .select_related("user")
        .filter(key_digest=digest(key))
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    # At most one write a minute per token, not one per request.
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
