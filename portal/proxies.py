"""The client's address when the portal sits behind proxies (an Ingress controller,
a cloud load balancer): every request then comes from the proxy's REMOTE_ADDR, so
counting login failures (django-axes) or anonymous API calls (DRF throttles) by
REMOTE_ADDR would count everyone as one client, and lock everyone out at once.

PORTAL_TRUSTED_PROXIES says how many proxies stand in front of the portal. Each
appends the address it received the request from to X-Forwarded-For, so with N
proxies the client is the N-th entry from the right; entries further left are
whatever the client sent and are never believed. A request whose header has fewer
than N entries did not come through the proxies: it is counted by REMOTE_ADDR.
"""

import ipaddress

from django.conf import settings
from rest_framework import throttling


# axes' AccessAttempt.username column.
MAX_COUNTED_USERNAME = 255


def login_username(request, credentials=None):
    """The username a failed login is counted against (AXES_USERNAME_CALLABLE): as
    typed, cut to the column that keeps it. A longer one names no account, and
    stored whole it was a 500 on PostgreSQL for anyone at the login page."""
    source = credentials or getattr(request, "data", request.POST)
    username = source.get("username")
    return username[:MAX_COUNTED_USERNAME] if isinstance(username, str) else username


def client_ip(request):
    """The address to count this request's client by (AXES_CLIENT_IP_CALLABLE)."""
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.PORTAL_TRUSTED_PROXIES
    if not proxies:
        return remote
    header = request.META.get("HTTP_X_FORWARDED_FOR", "")
    forwarded = [entry.strip() for entry in header.split(",") if entry.strip()]
    if len(forwarded) < proxies:
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-proxies]))
    except ValueError:  # a proxy that does not write addresses: do not trust the header
        return remote


class AnonRateThrottle(throttling.AnonRateThrottle):
    def get_ident(self, request):
        return client_ip(request)


class UserRateThrottle(throttling.UserRateThrottle):
    def get_ident(self, request):  # anonymous callers only
        return client_ip(request)
