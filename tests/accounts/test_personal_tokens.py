"""Alice makes herself an API token on /account/tokens/, sees its key once,
uses it, and revokes it; expired and revoked tokens stop working."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from accounts.models import PersonalToken

URL = "/account/tokens/"


def logged_in(user):
    client = Client()
    client.force_login(user)
    return client


def create(client, name="nightly eval", days="30"):
    return client.post(URL, {"name": name, "days": days})


def key_in(response):
    match = re.search(r'<code class="token-key">(gpp_[\w-]+)</code>', response.content.decode())
    return match and match.group(1)


def api(key):
    return Client().get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}")


def test_it_shows_the_key_once_and_keeps_only_its_digest(alice):
    client = logged_in(alice)
    response = create(client)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    key = key_in(response)
    assert key and len(key) > 40
    token = PersonalToken.objects.get()
    assert key not in (token.key_digest, token.hint)
    assert key.startswith(token.hint)
    page = client.get(URL).content.decode()
    assert key not in page
    assert "nightly eval" in page
    assert token.hint in page


def test_the_key_acts_as_its_owner(alice, bob):
    key = key_in(create(logged_in(alice)))
    response = api(key)
    assert response.status_code == 200
    assert [team["slug"] for team in response.json()["results"]] == ["vision"]
    assert PersonalToken.objects.get().last_used_at is not None


def test_a_revoked_token_stops_working(alice):
    client = logged_in(alice)
    key = key_in(create(client))
    token = PersonalToken.objects.get()
    response = client.post(f"{URL}{token.pk}/revoke/", follow=True)
    assert "Token revoked" in response.content.decode()
    assert api(key).status_code == 401
    assert api(key).json() == {"detail": "Invalid, expired or revoked token."}
    assert "revoked" in client.get(URL).content.decode()


def test_an_expired_token_stops_working(alice):
    key = key_in(create(logged_in(alice), days="7"))
    with time_machine.travel(timezone.now() + timedelta(days=7, seconds=1)):
        assert api(key).status_code == 401
    with time_machine.travel(timezone.now() + timedelta(days=6)):
        assert api(key).status_code == 200


def test_nobody_else_can_revoke_it(alice, bob):
    key = key_in(create(logged_in(alice)))
    token = PersonalToken.objects.get()
    response = logged_in(bob).post(f"{URL}{token.pk}/revoke/")
    assert response.status_code == 302
    assert api(key).status_code == 200
    assert "nightly eval" not in logged_in(bob).get(URL).content.decode()


def test_revoking_is_post_only(alice):
    create(logged_in(alice))
    token = PersonalToken.objects.get()
    assert logged_in(alice).get(f"{URL}{token.pk}/revoke/").status_code == 405


@pytest.mark.parametrize(
    ("name", "days"),
    [("", "30"), ("x" * 101, "30"), ("ok", "5"), ("ok", "forever"), ("ok", "")],
)
def test_it_refuses_bad_input_with_a_form_error(alice, name, days):
    response = create(logged_in(alice), name=name, days=days)
    assert response.status_code == 400
    assert 'class="field-errors"' in response.content.decode()
    assert not PersonalToken.objects.exists()


def test_a_made_up_personal_key_is_refused(db):
    assert api("gpp_" + "x" * 43).status_code == 401


def test_anonymous_visitors_are_sent_to_log_in(db):
    response = Client().get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
