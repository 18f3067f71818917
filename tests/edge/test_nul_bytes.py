"""A NUL character anywhere a view could pass it to PostgreSQL is refused at
the edge with 400 (JSON under /api/, a page elsewhere), and so is a number
too large for Django to turn into a date."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.api.conftest import client_for


def assert_api_400(response):
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    assert "NUL" in response.json()["detail"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/quota-requests/?team=%00",
        "/api/v1/quota-requests/?status=%00",
        "/api/v1/quota-requests/?%00=1",
        "/api/v1/teams/%00/",
        "/api/v1/quota-requests/%00/",
    ],
)
def test_it_refuses_a_nul_in_the_api_url(alice, url):
    assert_api_400(client_for(alice).get(url))


@pytest.mark.parametrize("url", ["/?x=%00", "/requests/new/?flavor=%00", "/accounts/%00/"])
def test_it_refuses_a_nul_in_a_page_url_with_a_page(alice, url):
    response = Client().get(url)
    assert response.status_code == 400
    assert b"<h1>Bad request</h1>" in response.content
    assert b"NUL" in response.content


@pytest.mark.parametrize("logged_in", [False, True])
@pytest.mark.parametrize("url", ["/", "/accounts/login/", "/api/v1/teams/"])
def test_it_refuses_a_nul_in_the_session_cookie(alice, url, logged_in):
    client = Client()
    if logged_in:
        client.force_login(alice)
    client.cookies["sessionid"] = "abc\x00def"
    response = client.get(url)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_it_refuses_an_octal_escaped_nul_in_a_quoted_cookie(alice):
    # Django's cookie parser turns "\000" inside quotes into a real NUL.
    response = Client(HTTP_COOKIE='sessionid="abc\\000def"').get("/accounts/login/")
    assert response.status_code == 400


def test_it_refuses_a_nul_in_an_api_token(alice):
    Token.objects.create(user=alice, key="a" * 40)
    response = Client().get("/api/v1/teams/", HTTP_AUTHORIZATION="Token a\x00b")
    assert_api_400(response)
    # The same client with the real token is let in.
    ok = Client().get("/api/v1/teams/", HTTP_AUTHORIZATION="Token " + "a" * 40)
    assert ok.status_code == 200


def test_it_refuses_a_nul_in_the_login_form_fields(alice):
    response = Client().post("/accounts/login/?next=%00", {"username": "alice", "password": "x"})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "query",
    ["status=%00", "team__id__exact=%00", "starts_at__year=99999999999999999999", "q=%00"],
)
def test_the_admin_changelist_refuses_bad_filters(admin_user, query):
    admin_user.is_superuser = True
    admin_user.save()
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    response = client.get(f"/admin/gpu_requests/quotarequest/?{query}")
    assert response.status_code == 400
    assert b"<h1>Bad request</h1>" in response.content
    # The filters a human uses still work.
    assert client.get("/admin/gpu_requests/quotarequest/?starts_at__year=2030").status_code == 200
