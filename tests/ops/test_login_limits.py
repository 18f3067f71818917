"""Guessing passwords: past PORTAL_LOGIN_FAILURE_LIMIT (5) failures for one
username, or from one address, logins are refused with 429, the right
password included."""

from django.test import Client

URL = "/accounts/login/"


def attempt(username, password, address="10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(URL, {"username": username, "password": password})


def test_a_username_is_locked_after_five_failures_from_anywhere(alice):
    for n in range(4):
        response = attempt("alice", "wrong", address=f"10.0.0.{n + 1}")
        assert response.status_code == 200  # the form again, with its error
        assert "did not match" in response.content.decode()
    assert attempt("alice", "wrong", address="10.0.0.5").status_code == 429  # the fifth
    locked = attempt("alice", "demo", address="10.0.0.99")
    assert locked.status_code == 429
    assert "_auth_user_id" not in locked.wsgi_request.session


def test_an_address_is_locked_after_five_failures_for_anyone(alice, bob):
    for n in range(4):
        assert attempt(f"nobody{n}", "wrong", address="10.9.9.9").status_code == 200
    assert attempt("nobody4", "wrong", address="10.9.9.9").status_code == 429
    assert attempt("bob", "demo", address="10.9.9.9").status_code == 429
    # Another address still gets in.
    response = attempt("bob", "demo", address="10.1.1.1")
    assert response.status_code == 302


def test_a_success_clears_the_count(alice):
    for _ in range(4):
        attempt("alice", "wrong")
    assert attempt("alice", "demo").status_code == 302
    for _ in range(4):
        attempt("alice", "wrong")
    assert attempt("alice", "demo").status_code == 302


# --- behind proxies (PORTAL_TRUSTED_PROXIES) ---

INGRESS = "10.42.0.7"  # the Ingress controller's pod: every request's REMOTE_ADDR


def through_ingress(username, password, client, sent=""):
    """A login relayed by one proxy, which appends the address it saw to whatever
    X-Forwarded-For the client `sent`."""
    forwarded = f"{sent}, {client}" if sent else client
    return Client(REMOTE_ADDR=INGRESS, HTTP_X_FORWARDED_FOR=forwarded).post(
        URL, {"username": username, "password": password}
    )


def test_behind_the_ingress_each_client_is_counted_by_its_own_address(alice, bob, settings):
    settings.PORTAL_TRUSTED_PROXIES = 1
    for n in range(4):
        assert through_ingress(f"nobody{n}", "wrong", client="203.0.113.9").status_code == 200
    assert through_ingress("nobody4", "wrong", client="203.0.113.9").status_code == 429
    assert through_ingress("bob", "demo", client="203.0.113.9").status_code == 429
    # Everyone else, through the same Ingress, still gets in.
    assert through_ingress("bob", "demo", client="198.51.100.20").status_code == 302


def test_an_address_the_client_forged_is_not_believed(alice, settings):
    settings.PORTAL_TRUSTED_PROXIES = 1
    for n in range(5):  # a different forged address each time, from one real client
        response = through_ingress(f"nobody{n}", "wrong", client="203.0.113.9", sent=f"1.2.3.{n}")
    assert response.status_code == 429
    assert through_ingress("alice", "demo", client="203.0.113.9", sent="9.9.9.9").status_code == 429


def test_without_trusted_proxies_the_header_is_ignored(alice, bob, settings):
    settings.PORTAL_TRUSTED_PROXIES = 0
    for n in range(5):  # five clients, one REMOTE_ADDR: the risk the setting removes
        through_ingress(f"nobody{n}", "wrong", client=f"203.0.113.{n}")
    assert through_ingress("bob", "demo", client="198.51.100.20").status_code == 429


def test_a_username_longer_than_any_is_a_failed_login_not_a_500(alice):
    # axes keeps the username in a 255-character column (a 500 on PostgreSQL before).
    for _ in range(4):
        response = attempt("w" * 10_000, "wrong")
        assert response.status_code == 200
    assert attempt("w" * 10_000, "wrong").status_code == 429
