"""API errors are JSON of one shape, `{"detail": ...}`, even where Django
itself answers: unknown URLs, server errors."""

import pytest
from django.test import Client

from gpu_requests import api
from tests.api.conftest import client_for


def test_an_unknown_api_url_is_a_json_404(alice):
    response = client_for(alice).get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_an_unknown_page_is_still_a_page(alice):
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    assert b"<h1>Not found</h1>" in response.content


@pytest.fixture
def broken_teams(monkeypatch):
    """The teams query fails as a lost database would (fault injection)."""

    def fail(user):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(api.access, "teams_for", fail)


def test_a_server_error_in_the_api_is_json(alice, broken_teams):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get("/api/v1/teams/")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Server error."}


def test_a_server_error_on_a_page_is_a_page(alice, broken_teams):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 500
    assert b"Something went wrong" in response.content
