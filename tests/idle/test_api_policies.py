"""/api/v1/idle-policies/: admins set a flavor's, managers tighten their team's."""

from datetime import UTC, datetime

import pytest

from idle.models import IdleAction, IdlePolicy
from teams.models import AuditEvent

URL = "/api/v1/idle-policies/"
BASE = {"flavor": "h100", "idle_minutes": 30, "grace_minutes": 15, "mode": "act"}


def post(client, body):
    return client.post(URL, body, content_type="application/json")


@pytest.fixture
def flavor_policy(client, admin_user, h100):
    client.force_login(admin_user)
    response = post(client, BASE)
    assert response.status_code == 200, response.json()
    client.logout()
    return response.json()


def test_an_admin_sets_a_flavor_policy_and_the_change_is_audited(client, admin_user, h100):
    client.force_login(admin_user)
    assert post(client, {**BASE, "mode": "report"}).json() == {
        "id": IdlePolicy.objects.get().pk,
        "flavor": "h100",
        "team": None,
        "idle_minutes": 30,
        "grace_minutes": 15,
        "mode": "report",
        "enabled": True,
    }
    assert post(client, BASE).json()["mode"] == "act"
    assert IdlePolicy.objects.count() == 1
    reasons = list(
        AuditEvent.objects.filter(action="idle_policy_set")
        .order_by("pk")
        .values_list("reason", flat=True)
    )
    assert reasons == [
        "h100 (every team): none -> idle 30 min, grace 15 min, report only",
        "h100 (every team): idle 30 min, grace 15 min, report only"
        " -> idle 30 min, grace 15 min, act",
    ]


def test_members_may_not_set_a_flavor_policy(client, carol, alice, h100):
    for user in (carol, alice):
        client.force_login(user)
        assert post(client, BASE).status_code == 403
    assert not IdlePolicy.objects.exists()


def test_a_manager_tightens_the_team_policy_but_may_not_loosen_it(
    client, carol, alice, vision, flavor_policy
):
    client.force_login(carol)
    stricter = {**BASE, "team": "vision", "idle_minutes": 10, "grace_minutes": 5}
    response = post(client, stricter)
    assert response.status_code == 200 and response.json()["team"] == "vision"
    for field, value in (
        ("idle_minutes", 31),
        ("grace_minutes", 16),
        ("mode", "report"),
        ("enabled", False),
    ):
        response = post(client, {**stricter, field: value})
        assert response.status_code == 400, field
        assert field in response.json(), response.json()
    assert IdlePolicy.objects.get(team=vision).idle_minutes == 10
    event = AuditEvent.objects.get(action="idle_policy_set", team=vision)
    assert event.actor == carol
    client.force_login(alice)  # a member, not a manager
    assert post(client, stricter).status_code == 403


def test_a_flavor_policy_made_stricter_still_wins_field_by_field(
    client, admin_user, carol, vision, h100, flavor_policy
):
    from idle.models import effective

    client.force_login(carol)
    post(client, {**BASE, "team": "vision", "idle_minutes": 10, "grace_minutes": 15})
    client.force_login(admin_user)
    post(client, {**BASE, "grace_minutes": 5})
    base = IdlePolicy.objects.get(team=None)
    team = IdlePolicy.objects.get(team=vision)
    policy = effective(base, team)
    assert (policy.idle_minutes, policy.grace_minutes, policy.mode) == (10, 5, "act")


def test_members_read_the_flavors_and_their_own_teams_policies(
    client, admin_user, carol, bob, nlp, flavor_policy
):
    client.force_login(carol)
    post(client, {**BASE, "team": "vision", "idle_minutes": 10})
    client.force_login(bob)
    assert [(p["flavor"], p["team"]) for p in client.get(URL).json()] == [("h100", None)]
    vision_policy = IdlePolicy.objects.get(team__slug="vision").pk
    assert client.get(f"{URL}{vision_policy}/").status_code == 404
    assert post(client, {**BASE, "team": "vision", "idle_minutes": 10}).status_code == 400
    client.force_login(admin_user)
    assert len(client.get(URL).json()) == 2


def test_a_manager_removes_the_team_policy_audited(client, carol, alice, vision, flavor_policy):
    client.force_login(carol)
    team_policy = post(client, {**BASE, "team": "vision", "idle_minutes": 10}).json()["id"]
    client.force_login(alice)
    assert client.delete(f"{URL}{team_policy}/").status_code == 403
    assert client.delete(f"{URL}{flavor_policy['id']}/").status_code == 403
    client.force_login(carol)
    assert client.delete(f"{URL}{team_policy}/").status_code == 204
    assert client.delete(f"{URL}{flavor_policy['id']}/").status_code == 403
    assert AuditEvent.objects.filter(action="idle_policy_remove", actor=carol).count() == 1
    assert list(IdlePolicy.objects.values_list("team", flat=True)) == [None]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("idle_minutes", 10**30),
        ("idle_minutes", "9" * 5000),
        ("idle_minutes", 0),
        ("idle_minutes", -5),
        ("idle_minutes", "١٠"),
        ("idle_minutes", "²"),
        ("idle_minutes", True),
        ("idle_minutes", 1.5),
        ("idle_minutes", None),
        ("grace_minutes", 7 * 24 * 60 + 1),
        ("grace_minutes", "1\x00"),
        ("mode", "delete-everything"),
        ("mode", "act\x00"),
        ("flavor", "h1\x0000"),
        ("flavor", "no-such-flavor"),
        ("flavor", "é" * 60),
        ("team", "vis\x00ion"),
        ("team", "nlp"),
        ("enabled", "maybe"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(client, carol, vision, nlp, h100, field, value):
    client.force_login(carol)
    response = post(client, {**BASE, "team": "vision", field: value})
    assert response.status_code == 400, (field, value, response.content[:200])
    assert field in response.json()
    assert not IdlePolicy.objects.exists()


def test_a_huge_json_number_is_a_400(client, admin_user, h100):
    client.force_login(admin_user)
    body = '{"flavor": "h100", "idle_minutes": 1%s, "grace_minutes": 1}' % ("0" * 5000)
    response = client.post(URL, body, content_type="application/json")
    assert response.status_code == 400


def test_ascii_digits_in_a_string_are_minutes(client, admin_user, h100):
    client.force_login(admin_user)
    response = post(client, {**BASE, "idle_minutes": "45"})
    assert response.status_code == 200 and response.json()["idle_minutes"] == 45


def test_the_log_shows_members_their_teams_rows(client, alice, bob, vision, nlp, h100):
    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    for team in (vision, nlp):
        IdleAction.objects.create(
            team=team,
            flavor=h100,
            namespace=f"team-{team.slug}",
            workload_kind="Deployment",
            workload_name="notebook",
            kind=IdleAction.Kind.ANNOUNCED,
            mode="act",
            at=at,
            gpus=1,
        )
    client.force_login(alice)
    body = client.get("/api/v1/idle-actions/").json()
    assert [row["team"] for row in body["results"]] == ["vision"]
    assert body["results"][0]["kind"] == "announced"
    assert client.get("/api/v1/idle-actions/?team=nlp").status_code == 404
    assert client.get("/api/v1/idle-actions/?team=n%00lp").status_code == 400
    client.force_login(bob)
    assert [r["team"] for r in client.get("/api/v1/idle-actions/").json()["results"]] == ["nlp"]
