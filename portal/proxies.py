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


class AtomicCounting:
    """DRF's rate throttle, counted atomically.

    DRF reads a caller's history from the cache and writes it back: parallel
    requests all read the same history, and 16 threads got 1,848 calls through a
    limit of 1,200 a minute. Here each request is one atomic increment (Redis
    INCR; the local-memory cache takes a lock) of the caller's counter for the
    current window, and the previous window's count weighs in for the part of it
    still within the last `duration` seconds (a sliding window, approximated), so
    a burst across a window's edge gets no second allowance. A refused request is
    taken off again: only answered calls count.
    """

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        key = f"{self.key}:{window}"
        # Kept two windows: the key never expires while it is counted (an INCR on an
        # expired key would start a counter with no expiry), and it is the previous
        # window for the next one.
        self.cache.add(key, 0, timeout=2 * self.duration)
        try:
            count = self.cache.incr(key)
        except ValueError:  # evicted between the two calls
            self.cache.add(key, 1, timeout=2 * self.duration)
            count = 1
        previous = self.cache.get(f"{self.key}:{window - 1}", 0)
        elapsed = now / self.duration - window  # of the current window, 0 to 1
        self.window_ends_at = (window + 1) * self.duration
        if count + previous * (1 - elapsed) <= self.num_requests:
            return True
        self.cache.decr(key)
        return False

    def wait(self):
        return max(1, int(self.window_ends_at - self.timer()) + 1)


class AnonRateThrottle(AtomicCounting, throttling.AnonRateThrottle):
    def get_ident(self, request):
        return client_ip(request)


class UserRateThrottle(AtomicCounting, throttling.UserRateThrottle):
    def get_ident(self, request):  # anonymous callers only
        return client_ip(request)
