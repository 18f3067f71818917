from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from provisioning import actions
from provisioning.models import TeamSync
from teams import actions as team_actions
from teams.api import exception_handler
from tests.api.conftest import client_for
from tests.factories import TeamFactory

NOT_PROVISIONED = {
    "status": "not_provisioned",
    "last_error": None,
    "last_error_status": None,
    "last_error_at": None,
    "last_synced_at": None,
    "archived": False,
    "namespace_deleted": False,
}


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


def test_it_says_a_team_without_a_sync_is_not_provisioned(alice):
    response = client_for(alice).get("/api/v1/teams/vision/")
    assert response.json()["sync"] == NOT_PROVISIONED


def test_it_shows_a_pending_sync(alice, vision):
    actions.mark_dirty(vision.pk)
    response = client_for(alice).get("/api/v1/teams/vision/")
    assert response.json()["sync"] == {**NOT_PROVISIONED, "status": "pending"}


def test_it_shows_a_failing_sync_with_the_servers_error(alice, vision):
    actions.mark_dirty(vision.pk)
    # Driving a real failure is tests/provisioning's business; here only its outcome matters.
    TeamSync.objects.filter(team=vision).update(
        status=TeamSync.Status.FAILING,
        last_error='resourcequotas "gpu-quota" is forbidden',
        last_error_status=403,
        last_error_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        last_synced_at=datetime(2030, 1, 1, tzinfo=UTC),
    )
    response = client_for(alice).get("/api/v1/teams/vision/")
    assert response.json()["sync"] == {
        "status": "failing",
        "last_error": 'resourcequotas "gpu-quota" is forbidden',
        "last_error_status": 403,
        "last_error_at": "2030-01-02T03:04:05Z",
        "last_synced_at": "2030-01-01T00:00:00Z",
        "archived": False,
        "namespace_deleted": False,
    }


def test_it_shows_an_archived_team(admin_user, vision):
    team_actions.archive_team(vision, by=admin_user)
    response = client_for(admin_user).get("/api/v1/teams/")
    syncs = {team["slug"]: team["sync"] for team in response.json()["results"]}
    assert syncs["vision"]["archived"] is True
    assert syncs["vision"]["status"] == "pending"
    assert syncs["nlp"] == NOT_PROVISIONED


def test_the_list_keeps_query_count_flat(admin_user, vision):
    client = client_for(admin_user)
    counts = []
    for _ in range(2):
        for _ in range(3):
            actions.mark_dirty(TeamFactory().pk)
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/api/v1/teams/")
        assert response.status_code == 200
        assert all("status" in team["sync"] for team in response.json()["results"])
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_a_refused_namespace_is_a_400_naming_the_slug(admin_user):
    """No endpoint makes teams yet; one calling `create_team` answers its refusal of
    a namespace the portal never uses as every action's validation error is
    answered: a 400 naming the field."""
    with pytest.raises(ValidationError) as raised:
        team_actions.create_team(name="System", slug="kube-system", by=admin_user)
    response = exception_handler(raised.value, {})
    assert response.status_code == 400
    assert response.data == {
        "slug": [
            "The portal never uses namespace kube-system: "
            "kube-system is a Kubernetes system namespace."
        ]
    }
