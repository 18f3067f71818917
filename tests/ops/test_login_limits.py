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
