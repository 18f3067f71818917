"""Each user's time zone: pages show times in it (zone named), forms read times in it;
the database stays UTC.

The zone is read from the preference once, at login, into the session, so
a page costs no query for it. A user with no preference yet has none in the
session: the page then sends the browser's zone (static/js/timezone.js) and
it is stored, so the browser's zone is the default from the first login on.
"""

from zoneinfo import ZoneInfo

from django.contrib.auth.signals import user_logged_in
from django.core.exceptions import ValidationError
from django.dispatch import receiver
from django.utils import timezone

from gpu_requests.models import UserPreference, valid_time_zone

SESSION_KEY = "portal_time_zone"


def remember(request, name):
    """Store `name` as the user's zone (ValidationError if it is none) and use it now."""
    valid_time_zone(name)
    UserPreference.objects.update_or_create(user=request.user, defaults={"time_zone": name})
    request.session[SESSION_KEY] = name
    timezone.activate(ZoneInfo(name))


@receiver(user_logged_in, dispatch_uid="portal_time_zone")
def _load_at_login(sender, request, user, **kwargs):
    if request is None:
        return
    preference = UserPreference.objects.filter(user=user).first()
    if preference is not None:
        request.session[SESSION_KEY] = preference.time_zone


class TimeZoneMiddleware:
    """Activate the session's zone for the request (UTC until one is known)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
        try:
            if name:
                valid_time_zone(name)
                timezone.activate(ZoneInfo(name))
            else:
                timezone.deactivate()
        except ValidationError:
            timezone.deactivate()
        return self.get_response(request)


def context(request):
    """Template context: the zone in use, and whether the browser should tell us its own."""
    unset = bool(
        getattr(request, "user", None)
        and request.user.is_authenticated
        and hasattr(request, "session")
        and SESSION_KEY not in request.session
    )
    return {"time_zone_name": timezone.get_current_timezone_name(), "time_zone_unset": unset}
