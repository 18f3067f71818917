"""Idle policies in the Django admin: set through the action (audited), a
team's never looser than its flavor's; exemptions visible, read-only."""

from idle.models import IdlePolicy
from teams.models import AuditEvent


def form(flavor, team=None, **changes):
    return {
        "flavor": flavor.pk,
        "team": team.pk if team else "",
        "idle_minutes": "30",
        "grace_minutes": "15",
        "mode": "act",
        "enabled": "on",
        **changes,
    }


def test_an_admin_sets_policies_audited_and_never_looser_for_a_team(
    client, admin_user, vision, h100
):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    response = client.post("/admin/idle/idlepolicy/add/", form(h100))
    assert response.status_code == 302
    assert AuditEvent.objects.get(action="idle_policy_set").actor == admin_user
    page = client.post("/admin/idle/idlepolicy/add/", form(h100, vision, idle_minutes="45"))
    assert "At most 30, the flavor&#x27;s policy." in page.content.decode()
    page = client.post("/admin/idle/idlepolicy/add/", form(h100, vision, idle_minutes="9" * 30))
    assert page.status_code == 200 and not IdlePolicy.objects.filter(team=vision).exists()
    assert (
        client.post(
            "/admin/idle/idlepolicy/add/", form(h100, vision, idle_minutes="10")
        ).status_code
        == 302
    )
    policy = IdlePolicy.objects.get(team=vision)
    assert policy.idle_minutes == 10 and policy.updated_by == admin_user
    response = client.post(f"/admin/idle/idlepolicy/{policy.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert AuditEvent.objects.filter(action="idle_policy_remove").count() == 1
    assert client.get("/admin/idle/exemption/").status_code == 200
    assert client.get("/admin/idle/idleaction/").status_code == 200


def test_changing_a_policy_keeps_its_flavor_and_team(client, admin_user, vision, h100):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    client.post("/admin/idle/idlepolicy/add/", form(h100))
    policy = IdlePolicy.objects.get()
    change = {"idle_minutes": "20", "grace_minutes": "15", "mode": "report", "enabled": "on"}
    response = client.post(f"/admin/idle/idlepolicy/{policy.pk}/change/", change)
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.idle_minutes, policy.mode, IdlePolicy.objects.count()) == (20, "report", 1)
