"""Whatever the body, a bad request is a 400 naming the field (or a parse
error), never a 500, and leaves no row behind."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent
from tests.api.conftest import client_for
from tests.api.test_quota_requests_create import URL, payload
from tests.factories import FlavorFactory, next_week

START = next_week()


@pytest.fixture(autouse=True)
def setup(vision, nlp, alice, bob, h100):
    FlavorFactory(slug="k80", name="K80", is_active=False)


def post_json(client, body):
    """Posts `body` as JSON text: exactly these bytes, even invalid ones."""
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(URL, text, content_type="application/json")


def assert_nothing_written():
    assert not QuotaRequest.objects.exists()
    assert not AuditEvent.objects.exists()


def iso(when):
    return when.isoformat()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": -1}, "gpus"),
        ({"gpus": 17}, "gpus"),  # more than the flavor's 16
        ({"gpus": 10**30}, "gpus"),
        ({"gpus": 2.5}, "gpus"),
        ({"gpus": "two"}, "gpus"),
        ({"gpus": True}, "gpus"),
        ({"gpus": None}, "gpus"),
        ({"gpus": [2]}, "gpus"),
        ({"gpus": "9" * 2000}, "gpus"),
        ({"ends_at": iso(START)}, "ends_at"),
        ({"ends_at": iso(START - timedelta(hours=1))}, "ends_at"),
        ({"starts_at": iso(timezone.now() - timedelta(hours=1))}, "starts_at"),
        ({"starts_at": "next tuesday"}, "starts_at"),
        ({"starts_at": "2030-13-01T00:00:00Z"}, "starts_at"),
        ({"starts_at": 1893456000}, "starts_at"),
        ({"starts_at": None}, "starts_at"),
        ({"starts_at": "0001-01-01T00:00:00+01:00"}, "starts_at"),  # before year 1 in UTC
        ({"ends_at": "9999-12-31T23:59:59-01:00"}, "ends_at"),  # after year 9999 in UTC
        ({"ends_at": "soon"}, "ends_at"),
        ({"team": "no-such-team"}, "team"),
        ({"team": "nlp"}, "team"),  # exists, but alice is not in it
        ({"team": "x" * 64}, "team"),
        ({"team": ["vision"]}, "team"),
        ({"team": {"slug": "vision"}}, "team"),
        ({"team": ""}, "team"),
        ({"flavor": "no-such-flavor"}, "flavor"),
        ({"flavor": "k80"}, "flavor"),  # retired
        ({"flavor": "x" * 51}, "flavor"),
        ({"justification": "x" * 2001}, "justification"),
        ({"justification": ""}, "justification"),
        ({"justification": "null byte \x00 here"}, "justification"),
        ({"justification": None}, "justification"),
    ],
)
def test_it_names_the_bad_field(alice, changes, field):
    response = post_json(client_for(alice), payload(**changes))
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert_nothing_written()


@pytest.mark.parametrize(
    "field", ["team", "flavor", "gpus", "starts_at", "ends_at", "justification"]
)
def test_it_requires_every_field(alice, field):
    data = payload()
    del data[field]
    response = post_json(client_for(alice), data)
    assert response.status_code == 400
    assert response.json() == {field: ["This field is required."]}
    assert_nothing_written()


def test_it_refuses_timestamps_without_a_zone(alice):
    naive = next_week().replace(tzinfo=None)
    data = payload(starts_at=naive.isoformat(), ends_at=(naive + timedelta(hours=2)).isoformat())
    response = post_json(client_for(alice), data)
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"starts_at", "ends_at"}
    assert "Include a time zone" in body["starts_at"][0]
    assert_nothing_written()


def test_it_accepts_the_longest_justification(alice):
    response = post_json(client_for(alice), payload(justification="x" * 2000))
    assert response.status_code == 201


def test_it_reports_every_rule_broken_at_once(alice):
    data = payload(gpus=0, ends_at=iso(START), starts_at=iso(START))
    response = post_json(client_for(alice), data)
    assert response.status_code == 400
    assert set(response.json()) == {"gpus", "ends_at"}


def test_it_refuses_a_lone_surrogate(alice):
    # Valid JSON, but not encodable as UTF-8: PostgreSQL would refuse it.
    text = json.dumps(payload(justification="PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800")
    response = post_json(client_for(alice), text)
    assert response.status_code == 400
    assert "justification" in response.json()
    assert_nothing_written()


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "",
        "not json",
        '{"gpus": 2,}',
        '{"gpus": NaN}',
        '{"gpus": Infinity}',
        '{"gpus": ' + "9" * 5000 + "}",  # past Python's int digit limit
    ],
)
def test_it_explains_malformed_json(alice, text):
    response = post_json(client_for(alice), text)
    assert response.status_code == 400
    body = response.json()
    if text == "":
        # No body at all is an empty request: every field is missing.
        assert "team" in body
    else:
        assert body["detail"].startswith("JSON parse error")
    assert_nothing_written()


@pytest.mark.parametrize("text", ["[]", '"vision"', "42", "null"])
def test_it_wants_an_object(alice, text):
    response = post_json(client_for(alice), text)
    assert response.status_code == 400
    assert "non_field_errors" in response.json()
    assert_nothing_written()


@pytest.mark.parametrize("fmt", ["multipart", "form"])
def test_it_only_takes_json(alice, fmt):
    client = client_for(alice)
    if fmt == "multipart":
        response = client.post(URL, payload())
    else:
        response = client.post(
            URL, "team=vision&gpus=2", content_type="application/x-www-form-urlencoded"
        )
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]
    assert_nothing_written()


def test_it_caps_the_reason_of_a_decision(admin_user, alice, h100, vision):
    quota_request = post_json(client_for(alice), payload()).json()
    url = f"{URL}{quota_request['id']}/approve/"
    response = client_for(admin_user).post(url, {"reason": "x" * 2001}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()
    assert QuotaRequest.objects.get().status == "pending"
    assert AuditEvent.objects.count() == 1


def test_it_refuses_a_cost_too_large_to_store(alice):
    FlavorFactory(slug="big", capacity=1000, price_per_gpu_hour=1000)
    data = payload(flavor="big", gpus=1000, ends_at="9999-12-31T23:59:59Z")
    response = post_json(client_for(alice), data)
    assert response.status_code == 400
    assert_nothing_written()
