import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gpu_requests.models import QuotaRequest
from tests.api.test_quota_requests_create import URL, payload
from tests.factories import next_week, submit


def token_client(key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_token_authenticates(alice, vision, h100):
    quota_request = submit(vision, h100, alice, starts_at=next_week())
    client = token_client(Token.objects.create(user=alice).key)
    response = client.get(URL)
    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [quota_request.pk]


def test_a_token_needs_no_csrf_token(alice, vision, h100):
    client = token_client(Token.objects.create(user=alice).key)
    client.enforce_csrf_checks = True
    assert client.post(URL, payload(), format="json").status_code == 201
    assert QuotaRequest.objects.get().requested_by == alice


def test_a_session_needs_a_csrf_token(alice, vision, h100):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(URL, payload(), format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize(
    "header", ["Token not-a-token", "Token", "Token a b", "Bearer abc", "Basic YWxpY2U6ZGVtbw=="]
)
def test_a_bad_token_is_refused(alice, header):
    Token.objects.create(user=alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_an_inactive_users_token_is_refused(alice):
    key = Token.objects.create(user=alice).key
    alice.is_active = False
    alice.save()
    assert token_client(key).get(URL).status_code == 401


def test_anonymous_callers_are_asked_for_a_token(db):
    response = APIClient().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_the_command_prints_a_token(alice, capsys):
    call_command("api_token", "alice")
    key = capsys.readouterr().out.strip()
    assert Token.objects.get(user=alice).key == key
    call_command("api_token", "alice")
    assert capsys.readouterr().out.strip() == key  # same token again


def test_the_command_rotates_a_token(alice, capsys):
    old = Token.objects.create(user=alice).key
    call_command("api_token", "alice", "--rotate")
    new = capsys.readouterr().out.strip()
    assert new != old
    assert token_client(old).get(URL).status_code == 401
    assert token_client(new).get(URL).status_code == 200


def test_the_command_names_an_unknown_user(db):
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("api_token", "nobody")
