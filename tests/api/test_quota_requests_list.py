from unittest.mock import ANY

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gpu_requests import actions
from tests.api.conftest import client_for
from tests.factories import next_week, submit

URL = "/api/v1/quota-requests/"


@pytest.fixture
def requests(vision, nlp, alice, carol, bob, admin_user, h100, a100):
    """Two vision requests (one rejected) and one nlp request, newest last."""
    first = submit(vision, h100, alice, gpus=1)
    second = submit(vision, a100, carol, gpus=2)
    third = submit(nlp, h100, bob, gpus=3)

    actions.reject(second, by=admin_user, reason="not now")
    return {"first": first, "second": second, "third": third}


def ids(response):
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("admin_user", ["third", "second", "first"]),
        ("alice", ["second", "first"]),
        ("carol", ["second", "first"]),
        ("bob", ["third"]),
        ("charlie", []),
    ],
    indirect=["persona"],
)
def test_it_lists_the_callers_teams_requests_newest_first(persona, expected, requests):
    assert ids(client_for(persona).get(URL)) == [requests[name].pk for name in expected]


def test_it_lists_the_request_fields(alice, requests):
    row = client_for(alice).get(URL).json()["results"][1]
    assert row == {
        "id": requests["first"].pk,
        "team": "vision",
        "flavor": "h100",
        "flavor_name": "H100 80GB",
        "resource_name": "nvidia.com/gpu",
        "gpus": 1,
        "starts_at": row["starts_at"],
        "ends_at": row["ends_at"],
        "justification": "train",
        "status": "pending",
        "estimated_cost": "96.00",
        "requested_by": "alice",
        "created_at": row["created_at"],
    }


def test_it_filters_by_status_and_team(admin_user, requests):
    client = client_for(admin_user)
    assert ids(client.get(URL, {"status": "rejected"})) == [requests["second"].pk]
    assert ids(client.get(URL, {"team": "nlp"})) == [requests["third"].pk]
    assert ids(client.get(URL, {"team": "vision", "status": "pending"})) == [requests["first"].pk]
    assert ids(client.get(URL, {"status": "approved"})) == []


def test_it_keeps_the_team_filter_within_the_callers_teams(alice, requests):
    assert ids(client_for(alice).get(URL, {"team": "nlp"})) == []


def test_it_refuses_an_unknown_status(alice, requests):
    response = client_for(alice).get(URL, {"status": "bogus"})
    assert response.status_code == 400
    assert "status" in response.json()


def test_it_lists_in_a_fixed_number_of_queries(admin_user, requests, vision, alice, h100):
    client = client_for(admin_user)
    with CaptureQueriesContext(connection) as three:
        client.get(URL)
    for _ in range(5):
        submit(vision, h100, alice, starts_at=next_week(days=20))
    with CaptureQueriesContext(connection) as eight:
        assert len(ids(client.get(URL))) == 8
    assert len(eight) == len(three)


def test_it_paginates(alice, requests):
    body = client_for(alice).get(URL, {"limit": 1}).json()
    assert body["count"] == 2
    assert len(body["results"]) == 1
    assert "offset=1" in body["next"]


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "9" * 25},
        {"limit": "1001"},
        {"limit": "0"},
        {"limit": "-1"},
        {"limit": "ten"},
        {"limit": ""},
        {"limit": "١"},  # an Arabic-Indic one: isdigit(), but not for us
        {"offset": "9" * 25},
        {"offset": "-1"},
        {"offset": "1.5"},
    ],
)
def test_it_refuses_absurd_pages_naming_the_parameter(alice, requests, params):
    response = client_for(alice).get(URL, params)
    assert response.status_code == 400
    [name] = params
    assert response.json() == {name: [ANY]}


def test_it_takes_the_largest_page(alice, requests):
    response = client_for(alice).get(URL, {"limit": "1000", "offset": "1"})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


def test_it_shows_a_request_with_its_history(alice, requests):
    response = client_for(alice).get(f"{URL}{requests['second'].pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "rejected"
    assert body["flavor_name"] == "A100 80GB"
    assert [
        (e["action"], e["from_status"], e["to_status"], e["actor"]) for e in body["events"]
    ] == [
        ("submit", "", "pending", "carol"),
        ("reject", "pending", "rejected", "admin"),
    ]
    assert body["events"][1]["reason"] == "not now"


def test_it_shows_a_request_in_a_fixed_number_of_queries(alice, requests, admin_user):
    client = client_for(alice)
    url = f"{URL}{requests['first'].pk}/"
    with CaptureQueriesContext(connection) as one_event:
        client.get(url)

    actions.approve(requests["first"], by=admin_user)
    with CaptureQueriesContext(connection) as two_events:
        assert len(client.get(url).json()["events"]) == 2
    assert len(two_events) == len(one_event)


@pytest.mark.parametrize(
    ("persona", "request_name", "expected"),
    [
        ("admin_user", "first", 200),
        ("admin_user", "third", 200),
        ("alice", "first", 200),
        ("alice", "second", 200),  # carol's, same team
        ("carol", "first", 200),
        ("alice", "third", 404),
        ("bob", "first", 404),
        ("bob", "third", 200),
        ("charlie", "first", 404),
        (None, "first", 401),
    ],
    indirect=["persona"],
)
def test_it_shows_a_request_only_to_its_team_and_reviewers(
    persona, request_name, expected, requests
):
    response = client_for(persona).get(f"{URL}{requests[request_name].pk}/")
    assert response.status_code == expected


@pytest.mark.parametrize("pk", ["0", "99999", "9" * 30, "abc", "1.0", "-1"])
def test_it_answers_404_for_no_such_request(admin_user, requests, pk):
    assert client_for(admin_user).get(f"{URL}{pk}/").status_code == 404


def test_it_asks_anonymous_callers_to_authenticate(requests):
    assert client_for(None).get(URL).status_code == 401


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_it_does_not_edit_or_delete(admin_user, requests, method):
    client = client_for(admin_user)
    response = getattr(client, method)(f"{URL}{requests['first'].pk}/", {}, format="json")
    assert response.status_code == 405


def test_a_short_first_page_is_not_counted_again(alice, requests):
    with CaptureQueriesContext(connection) as queries:
        body = client_for(alice).get(URL).json()
    assert body["count"] == 2 and body["next"] is None
    assert not [q for q in queries if "COUNT(" in q["sql"].upper()]
    with CaptureQueriesContext(connection) as queries:
        body = client_for(alice).get(URL, {"limit": 1}).json()
    assert body["count"] == 2 and "offset=1" in body["next"]
    assert [q for q in queries if "COUNT(" in q["sql"].upper()]
