"""The idle policies page (/idle/policies/) and the team page's panel: admins set
any policy, a team's managers their team's, stricter only (a looser one is a form
error naming the field), members read what applies to their team."""

import pytest

from idle import actions
from idle.models import IdlePolicy
from teams.models import AuditEvent

URL = "/idle/policies/"
FLAVOR_POLICY = {"idle_minutes": 30, "grace_minutes": 15, "mode": "act", "enabled": True}


@pytest.fixture
def flavor_policy(admin_user, h100):
    return actions.set_policy(h100, None, by=admin_user, **FLAVOR_POLICY)


def form(flavor="h100", team="vision", **values):
    return {"flavor": flavor, "team": team, **{k: str(v) for k, v in values.items()}}


def post(client, user, body, query=""):
    client.force_login(user)
    return client.post(URL + query, body)


def test_it_lists_the_policies_that_apply_on_the_team_page(
    client, admin_user, carol, alice, vision, h100
):
    # The team's policy first, then a flavor's stricter in grace.
    actions.set_policy(h100, vision, by=carol, idle_minutes=10, grace_minutes=20, mode="act")
    actions.set_policy(h100, None, by=admin_user, **FLAVOR_POLICY)
    client.force_login(alice)
    html = client.get("/teams/vision/").content.decode()
    panel = html.split('id="idle-policies"')[1].split("</section>")[0]
    rows = panel.split('id="applying-h100"')[1].split("</tbody>")[0].split("</tr>")
    assert "Every team" in rows[0] and "30 min" in rows[0] and "15 min" in rows[0]
    assert "Vision's own" in rows[1] and "10 min" in rows[1] and "20 min" in rows[1]
    # In force: the stricter of each field (10 idle minutes, 15 of grace), acting.
    assert "In force" in rows[2] and "10 min" in rows[2] and "15 min" in rows[2]
    assert "Act" in rows[2]
    assert "/idle/policies/?team=vision" in panel


def test_a_team_with_no_policy_is_told_so(client, alice, vision):
    client.force_login(alice)
    html = client.get("/teams/vision/").content.decode()
    assert "No idle policy applies to Vision" in html


def test_an_admin_sets_a_flavors_policy_in_the_page(client, admin_user, h100):
    response = post(client, admin_user, form(team="", **FLAVOR_POLICY))
    assert response.status_code == 302 and response.url == URL
    policy = IdlePolicy.objects.get()
    assert (policy.team, policy.idle_minutes, policy.grace_minutes, policy.mode) == (
        None,
        30,
        15,
        "act",
    )
    assert AuditEvent.objects.filter(action="idle_policy_set").count() == 1
    page = client.get(URL).content.decode()
    assert f'id="policy-{policy.pk}"' in page and "every team" in page


def test_a_manager_tightens_their_teams_policy(client, flavor_policy, carol, vision):
    response = post(client, carol, form(idle_minutes=10, grace_minutes=5, mode="act", enabled="on"))
    assert response.status_code == 302 and response.url == URL + "?team=vision"
    policy = IdlePolicy.objects.get(team=vision)
    assert (policy.idle_minutes, policy.grace_minutes, policy.updated_by) == (10, 5, carol)
    page = client.get(response.url).content.decode()
    in_force = page.split('id="in-force"')[1].split("</section>")[0]
    assert "10 min" in in_force and "5 min" in in_force


@pytest.mark.parametrize(
    "values, field, message",
    [
        ({"idle_minutes": 60, "grace_minutes": 15, "mode": "act", "enabled": "on"},
         "idle_minutes", "At most 30, the flavor&#x27;s policy."),
        ({"idle_minutes": 30, "grace_minutes": 16, "mode": "act", "enabled": "on"},
         "grace_minutes", "At most 15, the flavor&#x27;s policy."),
        ({"idle_minutes": 30, "grace_minutes": 15, "mode": "report", "enabled": "on"},
         "mode", "a team&#x27;s may not only report."),
        ({"idle_minutes": 30, "grace_minutes": 15, "mode": "act"},
         "enabled", "a team&#x27;s may not disable it."),
    ],
)  # fmt: skip
def test_a_looser_policy_is_a_form_error(client, flavor_policy, carol, values, field, message):
    response = post(client, carol, form(**values))
    assert response.status_code == 400
    errors = response.content.decode().split(f'id="errors-{field}"')[1].split("</div>")[0]
    assert message in errors
    assert not IdlePolicy.objects.exclude(team=None).exists()


@pytest.mark.parametrize(
    "values, field",
    [
        ({"idle_minutes": "ten", "grace_minutes": 5, "mode": "act"}, "idle_minutes"),
        ({"idle_minutes": 0, "grace_minutes": 5, "mode": "act"}, "idle_minutes"),
        ({"idle_minutes": 10, "grace_minutes": 99999, "mode": "act"}, "grace_minutes"),
        ({"idle_minutes": 10, "grace_minutes": 5, "mode": "delete"}, "mode"),
        ({"flavor": "nope", "idle_minutes": 10, "grace_minutes": 5, "mode": "act"}, "flavor"),
    ],
)
def test_bad_input_is_a_form_error(client, carol, h100, values, field):
    response = post(client, carol, form(**values))
    assert response.status_code == 400
    errors = response.content.decode().split(f'id="errors-{field}"')[1].split("</div>")[0]
    assert "<p>" in errors
    assert not IdlePolicy.objects.exists()


def test_a_manager_sets_neither_the_flavors_nor_another_teams(client, carol, nlp, h100):
    for team, message in (
        ("", "Only platform admins set this idle policy."),
        ("nlp", "Select a valid choice."),
    ):
        response = post(
            client, carol, form(team=team, idle_minutes=10, grace_minutes=5, mode="act")
        )
        assert response.status_code == 400
        errors = response.content.decode().split('id="errors-team"')[1].split("</div>")[0]
        assert message in errors
    assert not IdlePolicy.objects.exists()


def test_a_member_reads_and_cannot_set(client, flavor_policy, alice):
    client.force_login(alice)
    page = client.get(URL).content.decode()
    assert f'id="policy-{flavor_policy.pk}"' in page
    assert "Set a policy" not in page and "/remove/" not in page
    assert post(client, alice, form(idle_minutes=10, grace_minutes=5)).status_code == 403


def test_another_teams_page_is_a_404(client, alice, vision, nlp):
    client.force_login(alice)
    assert "What applies to Vision" in client.get(URL + "?team=vision").content.decode()
    assert client.get(URL + "?team=nlp").status_code == 404


def test_a_manager_removes_their_teams_policy_not_the_flavors(
    client, flavor_policy, carol, vision, h100
):
    own = actions.set_policy(h100, vision, by=carol, idle_minutes=10, grace_minutes=5, mode="act")
    client.force_login(carol)
    response = client.post(f"/idle/policies/{own.pk}/remove/")
    assert response.status_code == 302 and response.url == URL + "?team=vision"
    assert not IdlePolicy.objects.filter(pk=own.pk).exists()
    assert client.post(f"/idle/policies/{flavor_policy.pk}/remove/").status_code == 403
    assert client.get(f"/idle/policies/{flavor_policy.pk}/remove/").status_code == 405
    assert IdlePolicy.objects.filter(pk=flavor_policy.pk).exists()
