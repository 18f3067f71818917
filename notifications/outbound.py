"""All of the portal's outgoing webhook HTTP: which URLs are allowed, the
signature, and one POST with a timeout that never raises.

A URL must be https (plain http only to a loopback address, and only where
PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK is on: a developer's machine, the tests)
and every address its host resolves to must be public, unless
PORTAL_WEBHOOK_ALLOW_PRIVATE is on: a webhook must not become a way to reach
the portal's own network (its database, the cloud's metadata service). The
check runs when the URL is saved and again at each attempt, and the POST goes
to the address that was checked (so a name that resolves elsewhere the second
time cannot slip through), with the host name kept for TLS and `Host`.
Redirects are not followed.
"""

import hashlib
import hmac
import ipaddress
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import certifi
import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError

from notifications.models import MAX_URL_LENGTH
from teams import inputs

SIGNATURE_VERSION = "v1"
HTTPS_PLEASE = "Use https: the notices say who asked for what."
# What the log keeps of a refusing receiver's answer.
MAX_ERROR = 300


def sign(secret, timestamp, body):
    """`v1=` and the hex HMAC-SHA256 of `v1:{timestamp}:{body}` keyed by the secret."""
    message = f"{SIGNATURE_VERSION}:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


# IPv6 addresses that carry an IPv4 one in their last 32 bits, which is where they
# lead: NAT64's well-known prefix, SIIT's IPv4-translated addresses and the old
# IPv4-compatible ones (:: and ::1 aside). Python 3.11 calls many of them global
# whatever IPv4 address they carry.
CARRY_IPV4 = [
    ipaddress.ip_network("64:ff9b::/96"),
    ipaddress.ip_network("::ffff:0:0:0/96"),
    ipaddress.ip_network("::/96"),
]
# Refused whatever they hold: NAT64's local-use prefix (where the IPv4 address sits
# depends on the operator's prefix length), Teredo (the client's address is
# obfuscated), site-local (deprecated, still routed inside some networks) and
# the 6to4 relays' anycast.
NEVER = [
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("2001::/32"),
    ipaddress.ip_network("fec0::/10"),
    ipaddress.ip_network("192.88.99.0/24"),
]


def _judged(ip):
    """The address a packet to `ip` really reaches, where it carries an IPv4 one."""
    if ip.version != 6:
        return ip
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip.sixtofour:
        return ip.sixtofour
    if int(ip) > 1 and any(ip in network for network in CARRY_IPV4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _address_refused(address):
    """Why this address may not receive webhooks, or ''."""
    given = ipaddress.ip_address(address)
    if any(given in network for network in NEVER):
        return (
            f"{address} is a transition or deprecated address; webhooks go to public addresses only"
        )
    ip = _judged(given)
    if ip != given and any(ip in network for network in NEVER):
        return f"{address} leads to {ip}, a relay address; webhooks go to public addresses only"
    # A developer's own machine, named as such (not reached through a translator).
    local = ip in (given, given.version == 6 and given.ipv4_mapped)
    if ip.is_loopback and local and settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK:
        return ""
    if ip.is_global and not ip.is_multicast:
        return ""
    if settings.PORTAL_WEBHOOK_ALLOW_PRIVATE and not (ip.is_multicast or ip.is_unspecified):
        return ""
    kind = (
        "a loopback"
        if ip.is_loopback
        else "a link-local"
        if ip.is_link_local
        else "a private"
        if ip.is_private
        else "a non-public"
    )
    if ip != given:
        return f"{address} leads to {ip}, {kind} address; webhooks go to public addresses only"
    return f"{address} is {kind} address; webhooks go to public addresses only"


def _resolve(host, port):
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValidationError(f"The host {host} cannot be resolved ({exc}).") from None
    return sorted({info[4][0] for info in infos})


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query
    address: str  # the checked address the POST goes to


def check_url(url):
    """The URL's Target, or ValidationError saying what is wrong with it (one DNS lookup)."""
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(f"Keep the URL to {MAX_URL_LENGTH:,} characters.")
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValidationError("The URL contains control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"Not a URL: {exc}.") from None
    host = parts.hostname
    if parts.scheme not in ("https", "http") or not host:
        raise ValidationError("Give a full https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("Leave credentials out of the URL; requests are signed instead.")
    port = port or (443 if parts.scheme == "https" else 80)
    plain = parts.scheme == "http"
    if plain and not settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK:
        raise ValidationError(HTTPS_PLEASE)
    addresses = _resolve(host, port)
    refusals = [why for why in map(_address_refused, addresses) if why]
    if refusals:
        raise ValidationError(f"{host}: {refusals[0]}.")
    if plain and not all(ipaddress.ip_address(a).is_loopback for a in addresses):
        raise ValidationError(HTTPS_PLEASE)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, host, port, path, addresses[0])


@dataclass(frozen=True)
class Outcome:
    status: int | None  # the receiver's HTTP status; None if there was no answer
    error: str  # '' when delivered
    retry_after: int | None = None  # seconds, from a 429 or 503's Retry-After
    refused: bool = False  # the URL itself is not allowed (any more): nothing was sent

    @property
    def delivered(self):
        return self.status is not None and 200 <= self.status < 300

    @property
    def permanent(self):
        """Not worth retrying: the receiver refused the request itself (a gone or
        forbidden hook), or we refuse the URL. Timeouts, 408, 429 and 5xx are worth
        another try."""
        if self.refused:
            return True
        return (
            self.status is not None and 400 <= self.status < 500 and self.status not in (408, 429)
        )


def post(url, body, headers):
    """POST `body` (bytes) to `url`; an Outcome, never an exception."""
    try:
        target = check_url(url)
    except ValidationError as exc:
        return Outcome(None, " ".join(exc.messages)[:MAX_ERROR], refused=True)
    timeout = urllib3.Timeout(total=settings.PORTAL_WEBHOOK_TIMEOUT)
    if target.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(
            target.address,
            target.port,
            timeout=timeout,
            retries=False,
            server_hostname=target.host,
            assert_hostname=target.host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=certifi.where(),
        )
    else:
        pool = urllib3.HTTPConnectionPool(
            target.address, target.port, timeout=timeout, retries=False
        )
    default_port = 443 if target.scheme == "https" else 80
    host = target.host if ":" not in target.host else f"[{target.host}]"
    host_header = host if target.port == default_port else f"{host}:{target.port}"
    try:
        with pool:
            response = pool.urlopen(
                "POST",
                target.path,
                body=body,
                headers={**headers, "Host": host_header},
                redirect=False,
                preload_content=False,
            )
            answer = response.read(MAX_ERROR, decode_content=False)
            response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:MAX_ERROR])
    if 200 <= response.status < 300:
        return Outcome(response.status, "")
    text = answer.decode("utf-8", "replace").strip()
    return Outcome(
        response.status,
        f"HTTP {response.status}: {text}"[:MAX_ERROR] if text else f"HTTP {response.status}",
        retry_after_seconds(response.headers.get("Retry-After")),
    )


def retry_after_seconds(value, now=None):
    """Seconds a receiver's Retry-After asks for (RFC 9110: whole seconds or an
    HTTP-date), or None when it says neither ("²" is no number, whatever
    `str.isdigit()` thinks)."""
    value = (value or "").strip()
    seconds = inputs.whole_number(value)
    if seconds is not None or not value:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    now = now or datetime.now(UTC)
    return max(0, int((when - now).total_seconds()))
