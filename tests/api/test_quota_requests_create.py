from datetime import timedelta

import pytest

from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent
from tests.api.conftest import client_for
from tests.factories import next_week

URL = "/api/v1/quota-requests/"


def payload(**changes):
    start = next_week()
    data = {
        "team": "vision",
        "flavor": "h100",
        "gpus": 2,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=24)).isoformat(),
        "justification": "Fine-tune the detector",
    }
    return {**data, **changes}


def test_it_submits_a_request(alice, h100):
    response = client_for(alice).post(URL, payload(), format="json")
    assert response.status_code == 201
    body = response.json()
    quota_request = QuotaRequest.objects.get()
    assert body["id"] == quota_request.pk
    assert body["status"] == "pending"
    assert body["team"] == "vision"
    assert body["flavor"] == "h100"
    assert body["flavor_name"] == "H100 80GB"
    assert body["resource_name"] == "nvidia.com/gpu"
    assert body["requested_by"] == "alice"
    assert body["estimated_cost"] == "192.00"  # 2 GPUs x 24 h x 4.00
    assert [event["action"] for event in body["events"]] == ["submit"]
    assert body["events"][0]["actor"] == "alice"
    assert quota_request.requested_by == alice
    assert quota_request.justification == "Fine-tune the detector"


def test_it_submits_an_open_ended_request(alice, h100):
    response = client_for(alice).post(URL, payload(ends_at=None), format="json")
    assert response.status_code == 201
    assert response.json()["ends_at"] is None
    assert response.json()["estimated_cost"] is None
    assert QuotaRequest.objects.get().ends_at is None


def test_it_reads_offsets(alice, h100):
    start = next_week().replace(tzinfo=None)
    data = payload(
        starts_at=f"{start.isoformat()}+02:00",
        ends_at=f"{(start + timedelta(hours=3)).isoformat()}Z",
    )
    assert client_for(alice).post(URL, data, format="json").status_code == 201
    quota_request = QuotaRequest.objects.get()
    assert quota_request.starts_at.replace(tzinfo=None) == start - timedelta(hours=2)
    assert quota_request.hours == 5


def test_it_ignores_fields_the_client_may_not_set(alice, bob, h100):
    data = payload(status="approved", requested_by="bob", estimated_cost="0.01", id=999)
    response = client_for(alice).post(URL, data, format="json")
    assert response.status_code == 201
    quota_request = QuotaRequest.objects.get()
    assert (quota_request.status, quota_request.requested_by) == ("pending", alice)
    assert quota_request.pk != 999
    assert quota_request.estimated_cost == 192


@pytest.mark.parametrize(
    ("persona", "team"),
    [("alice", "vision"), ("carol", "vision"), ("bob", "nlp"), ("admin_user", "nlp")],
    indirect=["persona"],
)
def test_members_and_reviewers_can_submit(persona, team, nlp, h100):
    response = client_for(persona).post(URL, payload(team=team), format="json")
    assert response.status_code == 201
    assert QuotaRequest.objects.get().team.slug == team


@pytest.mark.parametrize(
    ("persona", "team"),
    [("bob", "vision"), ("charlie", "vision"), ("alice", "nlp")],
    indirect=["persona"],
)
def test_it_refuses_teams_the_caller_is_not_in(persona, team, vision, nlp, h100):
    response = client_for(persona).post(URL, payload(team=team), format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["team"]
    assert not QuotaRequest.objects.exists()


def test_it_asks_anonymous_callers_to_authenticate(vision, h100):
    response = client_for(None).post(URL, payload(), format="json")
    assert response.status_code == 401
    assert not QuotaRequest.objects.exists()
    assert not AuditEvent.objects.exists()
