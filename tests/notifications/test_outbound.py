"""Which URLs may receive webhooks (SSRF), and the signed POST itself."""

import pytest
from django.core.exceptions import ValidationError

from notifications import outbound
from tests.notifications.conftest import verify


def refusal(url):
    with pytest.raises(ValidationError) as caught:
        outbound.check_url(url)
    return " ".join(caught.value.messages)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://10.0.0.7/hook", "10.0.0.7 is a private address"),
        ("https://192.168.1.20/hook", "192.168.1.20 is a private address"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("https://[fe80::1]/hook", "fe80::1 is a link-local address"),
        ("https://[::ffff:10.1.2.3]/hook", "10.1.2.3, a private address"),
        ("https://0.0.0.0/hook", "0.0.0.0 is a private address"),
        # IPv6 addresses that carry an IPv4 one are judged by it (Python 3.11 calls
        # them global): NAT64, 6to4, IPv4-compatible, SIIT.
        ("https://[64:ff9b::a9fe:a9fe]/hook", "leads to 169.254.169.254, a link-local"),
        ("https://[64:ff9b::10.0.0.7]/hook", "leads to 10.0.0.7, a private"),
        ("https://[2002:a00:7::1]/hook", "leads to 10.0.0.7, a private"),
        ("https://[2002:7f00:1::1]/hook", "leads to 127.0.0.1"),
        ("https://[::10.0.0.7]/hook", "leads to 10.0.0.7, a private"),
        ("https://[::169.254.169.254]/hook", "leads to 169.254.169.254, a link-local"),
        ("https://[::ffff:0:10.0.0.7]/hook", "leads to 10.0.0.7, a private"),
        # Refused whatever they hold.
        ("https://[fec0::1]/hook", "is a transition or deprecated address"),
        ("https://[64:ff9b:1::a00:7]/hook", "is a transition or deprecated address"),
        ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook", "is a transition or deprecated"),
        ("https://192.88.99.1/hook", "is a transition or deprecated address"),
        ("ftp://example.com/hook", "Give a full https:// URL"),
        ("hooks.slack.com/services/x", "Give a full https:// URL"),
        ("https://user:pw@example.com/hook", "Leave credentials out"),
        ("https://example.com:99999/hook", "Not a URL"),
        ("https://nothing-here.invalid/hook", "cannot be resolved"),
        ("https://exa\x00mple.com/hook", "control characters"),
        ("https://example.com/" + "a" * 5000, "Keep the URL to 2,000 characters"),
    ],
)
def test_refused_urls_say_why(url, says):
    assert says in refusal(url)


@pytest.mark.parametrize(
    "url", ["https://[64:ff9b::8.8.8.8]/hook", "https://[2002:808:808::1]/hook", "https://8.8.8.8/"]
)
def test_public_addresses_carried_in_ipv6_are_let_through(url):
    assert outbound.check_url(url).address


def test_loopback_is_refused_in_production(settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = False
    assert "127.0.0.1 is a loopback address" in refusal("https://127.0.0.1:8443/hook")
    assert "Use https" in refusal("http://localhost:8000/hook")


def test_plain_http_only_to_loopback_and_only_where_allowed(settings):
    assert outbound.check_url("http://127.0.0.1:9/hook").address == "127.0.0.1"
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    # A private receiver is allowed now, but not over plain http.
    assert outbound.check_url("https://10.0.0.7/hook").address == "10.0.0.7"
    assert "Use https" in refusal("http://10.0.0.7/hook")


def test_the_target_keeps_path_query_and_port():
    target = outbound.check_url("http://127.0.0.1:8080/a/b?c=d&e=f")
    assert (target.host, target.port, target.path) == ("127.0.0.1", 8080, "/a/b?c=d&e=f")


def test_the_signature_is_hmac_sha256_of_version_timestamp_and_body():
    body = b'{"text":"hi"}'
    headers = {
        "X-Portal-Timestamp": "1700000000",
        "X-Portal-Signature": outbound.sign("s3cret", 1700000000, body),
    }
    assert verify("s3cret", headers, body, now=1700000010)
    assert not verify("other", headers, body, now=1700000010)
    assert not verify("s3cret", headers, body + b" ", now=1700000010)
    assert not verify("s3cret", headers, body, now=1700000000 + 301)  # replayed late


def test_post_reaches_the_receiver_and_reports_its_answer(receiver):
    receiver.answer(503)
    failed = outbound.post(receiver.url, b"{}", {"Content-Type": "application/json"})
    assert (failed.status, failed.error, failed.delivered, failed.permanent) == (
        503,
        "HTTP 503: no_service",
        False,
        False,
    )
    done = outbound.post(receiver.url, b'{"a":1}', {"Content-Type": "application/json"})
    assert (done.status, done.error, done.delivered) == (200, "", True)
    last = receiver.requests()[-1]
    assert (last.path, last.body) == ("/hooks/portal?channel=gpu", b'{"a":1}')
    assert last.headers["Host"] == receiver.url.split("/")[2]


def test_post_to_nobody_is_an_outcome_not_an_exception(receiver):
    url = receiver.url
    receiver.close()
    outcome = outbound.post(url, b"{}", {})
    assert outcome.status is None and "Error" in outcome.error and not outcome.permanent


def test_post_checks_the_url_again_at_each_attempt(settings, receiver):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = False
    outcome = outbound.post(receiver.url.replace("http:", "https:"), b"{}", {})
    assert "127.0.0.1 is a loopback address" in outcome.error and receiver.requests() == []
    assert outcome.permanent  # given up at once: retrying would not change the address
