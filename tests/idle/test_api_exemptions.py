"""/api/v1/idle-exemptions/: a team's managers exempt a workload, audited."""

from datetime import timedelta

import pytest
from django.utils import timezone

from idle.models import Exemption
from teams.models import AuditEvent

URL = "/api/v1/idle-exemptions/"


def body(**changes):
    until = (timezone.now() + timedelta(days=1)).isoformat()
    return {
        "team": "vision",
        "namespace": "vision",
        "kind": "Deployment",
        "name": "notebook",
        "until": until,
        "reason": "demo on Friday",
        **changes,
    }


def test_a_manager_exempts_a_workload_and_it_is_audited(client, carol, alice, bob, vision):
    client.force_login(carol)
    response = client.post(URL, body(), content_type="application/json")
    assert response.status_code == 201, response.json()
    assert response.json()["created_by"] == "carol" and response.json()["team"] == "vision"
    event = AuditEvent.objects.get(action="idle_exempt")
    assert event.actor == carol and "Deployment vision/notebook until" in event.reason
    assert "demo on Friday" in event.reason
    client.force_login(alice)
    assert len(client.get(URL).json()["results"]) == 1
    assert client.post(URL, body(), content_type="application/json").status_code == 403
    client.force_login(bob)
    assert client.get(URL).json()["results"] == []
    assert client.post(URL, body(), content_type="application/json").status_code == 400


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "nlp"),
        ("namespace", "Vision\x00"),
        ("kind", "CronJob"),
        ("name", "x" * 300),
        ("name", "note\x00book"),
        ("until", "2020-01-01T00:00:00Z"),
        ("until", "tomorrow"),
        ("reason", "   "),
        ("reason", "x" * 2001),
        ("reason", "why\x00"),
        ("team", "vis\x00ion"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(client, carol, vision, nlp, field, value):
    client.force_login(carol)
    response = client.post(URL, body(**{field: value}), content_type="application/json")
    assert response.status_code == 400, (field, response.content[:300])
    assert field in response.json()
    assert not Exemption.objects.exists()
