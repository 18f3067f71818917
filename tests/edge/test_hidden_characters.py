"""Names and short texts that would display as something else are refused
where they are typed: a bidi override (U+202E makes "invoice\u202egpj.exe"
read "invoiceexe.jpg"), a zero-width space or joiner, a BOM (every invisible
format character, Unicode category Cf). Each door says which field: a form
error, a 400 naming the field, the admin's error. What the portal sends of
text it did not refuse (emails, webhooks) shows such characters as [U+XXXX].

One mechanism: `teams.inputs` (`has_control_characters` for one-line names,
`has_hidden_characters` for texts of several lines, and their validators),
the same that refuses line breaks and NUL bytes in names.
"""

import json
import re
import sys
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from accounts import actions as token_actions
from batch import validation
from cluster.models import Flavor
from gpu_requests.models import Comment, QuotaRequest
from idle.models import Exemption
from notifications import actions as notification_actions
from teams import actions as team_actions
from teams import emails, inputs
from teams.models import Team
from teams.notices import Notice
from tests.api.conftest import client_for
from tests.factories import next_week, submit

HIDDEN = [
    "\u202e",  # RIGHT-TO-LEFT OVERRIDE
    "\u202a",  # LEFT-TO-RIGHT EMBEDDING
    "\u2066",  # LEFT-TO-RIGHT ISOLATE
    "\u2069",  # POP DIRECTIONAL ISOLATE
    "\u200b",  # ZERO WIDTH SPACE
    "\u200d",  # ZERO WIDTH JOINER
    "\u200f",  # RIGHT-TO-LEFT MARK
    "\u2060",  # WORD JOINER
    "\ufeff",  # BYTE ORDER MARK
    "\u00ad",  # SOFT HYPHEN
]


def hide(char, text="vision"):
    return text[:3] + char + text[3:]


@pytest.mark.parametrize("char", HIDDEN)
def test_the_mechanism_finds_each_invisible_character(char):
    assert inputs.has_control_characters(hide(char))
    assert inputs.has_hidden_characters(hide(char))
    assert not inputs.has_hidden_characters("Zürich · 東京 · line\nbreak")
    assert inputs.shown(hide(char)) == f"vis[U+{ord(char):04X}]ion"


# --- team names: the action, the team form, the admin ---


@pytest.mark.parametrize("char", HIDDEN)
def test_a_team_name_with_an_invisible_character_is_refused_by_the_action(admin_user, char):
    with pytest.raises(ValidationError) as refused:
        team_actions.create_team(name=hide(char, "Robotics"), slug="robotics", by=admin_user)
    assert "name" in refused.value.message_dict
    assert f"U+{ord(char):04X}" in str(refused.value)


def test_the_new_team_form_says_the_name_holds_invisible_characters(client, admin_user):
    client.force_login(admin_user)
    response = client.post("/teams/new/", {"name": "Robo\u202etics", "slug": "robotics"})
    assert response.status_code in (200, 400)
    assert "invisible" in response.content.decode()
    assert not Team.objects.filter(slug="robotics").exists()


def test_the_admin_refuses_a_team_renamed_with_a_direction_override(client, vision):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "x")
    client.force_login(root)
    data = {
        "name": "Vis\u202eion",
        "slug": "vision",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    response = client.post(f"/admin/teams/team/{vision.pk}/change/", data)
    assert response.status_code == 200
    assert "invisible" in response.content.decode()
    vision.refresh_from_db()
    assert vision.name == "Vision"


# --- flavor names: the admin's catalog ---


def test_the_admin_refuses_a_flavor_named_with_a_zero_width_space(client, admin_user):
    admin_user.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_flavor", "change_flavor", "view_flavor"])
    )
    client.force_login(admin_user)
    form = {
        "name": "H100\u200b 80GB",
        "slug": "h100z",
        "gpu_model": "NVIDIA H100\u202e",
        "memory_gb": "80",
        "sharing": "whole",
        "resource_name": "nvidia.com/gpu",
        "node_selector": "{}",
        "tolerations": "[]",
        "capacity": "8",
        "price_per_gpu_hour": "4.0000",
        "is_active": "on",
    }
    response = client.post("/admin/cluster/flavor/add/", form)
    assert response.status_code == 200
    assert response.content.decode().count("invisible") >= 2  # name and GPU model
    assert not Flavor.objects.filter(slug="h100z").exists()


# --- a quota request's justification: the form and the API ---


def test_the_api_refuses_a_justification_with_a_bidi_override(alice, h100):
    start = next_week()
    data = {
        "team": "vision",
        "flavor": "h100",
        "gpus": 2,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=24)).isoformat(),
        "justification": "Train \u2066the\u2069 detector",
    }
    response = client_for(alice).post("/api/v1/quota-requests/", data, format="json")
    assert response.status_code == 400
    assert "invisible" in response.json()["justification"][0]
    assert not QuotaRequest.objects.exists()


def test_the_request_form_refuses_a_justification_with_a_bidi_override(client, alice, h100):
    client.force_login(alice)
    start = timezone.localtime(next_week())
    data = {
        "team": "vision",
        "flavor": str(h100.pk),
        "gpus": "2",
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (start + timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M"),
        "justification": "Train the\u202e detector",
    }
    response = client.post("/requests/new/", data)
    assert response.status_code in (200, 400)
    assert "invisible" in response.content.decode()
    assert not QuotaRequest.objects.exists()


# --- comments and decisions' reasons ---


@pytest.fixture
def pending(alice, h100, vision):
    return submit(vision, h100, alice)


def test_a_comment_with_a_zero_width_space_is_refused(client, alice, pending):
    client.force_login(alice)
    response = client.post(
        reverse("request_comment", args=[pending.pk]), {"body": "Earl\u200bier?"}, follow=True
    )
    assert response.status_code == 400
    assert "invisible" in response.content.decode()
    assert not Comment.objects.exists()


def test_a_rejection_reason_with_a_bidi_override_is_refused_naming_the_field(admin_user, pending):
    response = client_for(admin_user).post(
        f"/api/v1/quota-requests/{pending.pk}/reject/", {"reason": "no\u202e"}, format="json"
    )
    assert response.status_code == 400
    assert "invisible" in response.json()["reason"][0]
    pending.refresh_from_db()
    assert pending.status == "pending"


# --- batch job and window names, token names (one function each, every door) ---


@pytest.mark.parametrize("char", HIDDEN)
def test_job_window_and_token_names_with_invisible_characters_are_refused(alice, char):
    assert "invisible" in validation.name_errors(hide(char, "train-resnet"))[0]
    with pytest.raises(token_actions.TokenError) as refused:
        token_actions.create_token(alice, name=hide(char, "CI pipeline"), days=30)
    assert "invisible" in str(refused.value)


# --- an idle exemption's reason: the API ---


def test_the_api_refuses_an_exemption_reason_with_a_bidi_override(client, carol, vision):
    client.force_login(carol)
    data = {
        "team": "vision",
        "namespace": "vision",
        "kind": "Deployment",
        "name": "notebook",
        "until": (timezone.now() + timedelta(days=1)).isoformat(),
        "reason": "demo \u202eon Friday",
    }
    response = client.post("/api/v1/idle-exemptions/", data, content_type="application/json")
    assert response.status_code == 400
    assert "invisible" in response.json()["reason"][0]
    assert not Exemption.objects.exists()


# --- what is sent shows them ---


def test_an_email_subject_shows_invisible_characters(db):
    assert emails.send("batch_jobs", "Team Vis\u202eion: done", ["a@example.com"], {"items": []})
    assert mail.outbox[0].subject == "Team Vis[U+202E]ion: done"


def test_a_webhook_message_shows_invisible_characters(db):
    notice = Notice(
        event="test",
        team_id=None,
        title="Workload note\u202ebook",
        url="https://portal.example.com/x",
        facts=(("Team", "Vis\u200bion"),),
        at=timezone.now(),
    )
    body = json.loads(notification_actions.payload(notice))
    assert body["text"].startswith("Workload note[U+202E]book")
    assert "Vis[U+200B]ion" in json.dumps(body["blocks"], ensure_ascii=False)
    assert "\u202e" not in body["text"]


def test_the_ranges_are_unicodes_invisible_format_characters():
    ranged = {cp for low, high in inputs.HIDDEN_RANGES for cp in range(low, high + 1)}
    assert ranged == {cp for cp in range(sys.maxunicode + 1) if inputs.is_hidden(chr(cp))}


def test_the_schema_says_which_texts_refuse_them(admin_user):
    """A text the API refuses invisible characters in says so in its pattern, so a
    client (or a fuzzer) generating schema-valid input never meets that 400."""
    schema = client_for(admin_user).get("/api/schema/?format=json").json()
    reason = schema["components"]["schemas"]["ReasonRequest"]["properties"]["reason"]["pattern"]
    justification = schema["components"]["schemas"]["QuotaRequestCreateRequest"]["properties"][
        "justification"
    ]["pattern"]
    for pattern in (reason, justification):
        assert re.fullmatch(pattern, "no more GPUs this week\nthanks")
        for text in ("\u00ad", "a\u202eb", "\ufeffbom", "nul\x00"):
            assert not re.fullmatch(pattern, text), ascii(text)
    # Beyond the BMP the pattern says nothing (no tool reads it alike); the API refuses.
    response = client_for(admin_user).post(
        "/api/v1/quota-requests/", {"justification": "tag\U000e0041"}, format="json"
    )
    assert "invisible" in response.json()["justification"][0]
