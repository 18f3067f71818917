import pytest

from tests.api.conftest import client_for


@pytest.fixture(autouse=True)
def teams(vision, nlp):
    """Both teams exist in every test, so each can be missed."""


@pytest.mark.parametrize(
    ("persona", "slugs"),
    [
        ("admin_user", ["nlp", "vision"]),
        ("alice", ["vision"]),
        ("carol", ["vision"]),
        ("bob", ["nlp"]),
        ("charlie", []),
    ],
    indirect=["persona"],
)
def test_it_lists_the_callers_teams(persona, slugs):
    response = client_for(persona).get("/api/v1/teams/")
    assert response.status_code == 200
    assert [team["slug"] for team in response.json()["results"]] == slugs


def test_it_shows_a_team_by_slug(alice):
    response = client_for(alice).get("/api/v1/teams/vision/")
    assert response.status_code == 200
    assert response.json()["slug"] == "vision"
    assert response.json()["name"] == "Vision"


@pytest.mark.parametrize(
    ("persona", "slug", "expected"),
    [
        ("admin_user", "nlp", 200),
        ("admin_user", "vision", 200),
        ("alice", "vision", 200),
        ("alice", "nlp", 404),
        ("carol", "nlp", 404),
        ("bob", "vision", 404),
        ("bob", "nlp", 200),
        ("charlie", "vision", 404),
        ("admin_user", "no-such-team", 404),
    ],
    indirect=["persona"],
)
def test_it_hides_other_teams(persona, slug, expected):
    assert client_for(persona).get(f"/api/v1/teams/{slug}/").status_code == expected


@pytest.mark.parametrize("url", ["/api/v1/teams/", "/api/v1/teams/vision/"])
def test_it_asks_anonymous_callers_to_authenticate(db, url):
    response = client_for(None).get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_it_is_read_only(admin_user):
    client = client_for(admin_user)
    response = client.post("/api/v1/teams/", {"slug": "x", "name": "X"}, format="json")
    assert response.status_code == 405
    assert client.delete("/api/v1/teams/vision/").status_code == 405
