"""A query parameter a list does not declare is a 400 naming it, on every list
of the API (teams.api.Pagination): `?stauts=pending` is a mistake to point
out, never silently every row."""

import pytest

from tests.api.conftest import client_for

LISTS = [
    "/api/v1/teams/",
    "/api/v1/flavors/",
    "/api/v1/quota-requests/",
    "/api/v1/batch-windows/",
    "/api/v1/batch-jobs/",
    "/api/v1/idle-actions/",
    "/api/v1/idle-exemptions/",
    "/api/v1/idle-states/",
]


@pytest.mark.parametrize("url", LISTS)
def test_it_names_the_parameter_it_does_not_know(admin_user, url):
    response = client_for(admin_user).get(url, {"stauts": "pending", "limit": "5"})
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["stauts"]
    assert "Unknown query parameter" in response.json()["stauts"][0]


@pytest.mark.parametrize(
    ("url", "query"),
    [
        ("/api/v1/quota-requests/", {"status": "pending", "sort": "-created", "limit": "5"}),
        ("/api/v1/batch-jobs/", {"status": "", "team": "vision", "offset": "0"}),
        ("/api/v1/idle-actions/", {"team": "vision"}),
    ],
)
def test_the_parameters_it_declares_are_taken(admin_user, vision, url, query):
    assert client_for(admin_user).get(url, query).status_code == 200
