"""The Django admin's team page: membership changes reach the cluster at once."""

import pytest
from django.contrib.auth.models import Permission

from provisioning import actions
from provisioning.models import TeamSync
from teams.models import Membership, Team


@pytest.fixture
def admin_client(client, admin_user):
    # The review permission alone does not open the team pages of the Django admin.
    admin_user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "add_team",
                "change_team",
                "add_membership",
                "change_membership",
                "delete_membership",
            ]
        )
    )
    client.force_login(admin_user)
    return client


@pytest.fixture
def in_sync(vision):
    """Vision on the cluster, matching the database."""
    actions.mark_dirty(vision.pk)
    # Driving a real sync is tests/provisioning's business; here only its outcome matters.
    TeamSync.objects.filter(team=vision).update(status=TeamSync.Status.IN_SYNC, synced_generation=1)
    return TeamSync.objects.get(team=vision)


def _post(client, team, rows):
    """The team's change form as the browser sends it: one inline form per membership."""
    memberships = list(team.memberships.order_by("pk"))
    data = {
        "name": team.name,
        "slug": team.slug,
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(len(memberships)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for i, row in enumerate(rows):
        prefix = f"memberships-{i}-"
        data[prefix + "team"] = str(team.pk)
        data[prefix + "id"] = str(memberships[i].pk) if i < len(memberships) else ""
        data[prefix + "user"] = str(row["user"].pk)
        data[prefix + "role"] = row.get("role", "member")
        if row.get("delete"):
            data[prefix + "DELETE"] = "on"
    return client.post(f"/admin/teams/team/{team.pk}/change/", data)


def test_it_marks_the_team_pending_when_a_member_is_added(
    admin_client, vision, alice, charlie, in_sync
):
    response = _post(admin_client, vision, [{"user": alice}, {"user": charlie}])
    assert response.status_code == 302, response.content.decode()[:2000]
    assert vision.memberships.filter(user=charlie).exists()
    sync = TeamSync.objects.get(team=vision)
    assert sync.status == TeamSync.Status.PENDING
    assert sync.generation == in_sync.generation + 1


def test_it_marks_the_team_pending_when_a_member_is_removed(admin_client, vision, alice, in_sync):
    response = _post(admin_client, vision, [{"user": alice, "delete": True}])
    assert response.status_code == 302
    assert not vision.memberships.exists()
    assert TeamSync.objects.get(team=vision).status == TeamSync.Status.PENDING


def test_it_marks_the_team_pending_when_a_role_changes(admin_client, vision, alice, in_sync):
    response = _post(admin_client, vision, [{"user": alice, "role": "manager"}])
    assert response.status_code == 302
    assert vision.memberships.get(user=alice).role == Membership.Role.MANAGER
    assert TeamSync.objects.get(team=vision).generation == in_sync.generation + 1


def test_it_leaves_the_team_alone_when_only_its_name_changes(admin_client, vision, alice, in_sync):
    vision.name = "Computer Vision"
    response = _post(admin_client, vision, [{"user": alice}])
    assert response.status_code == 302
    sync = TeamSync.objects.get(team=vision)
    assert (sync.status, sync.generation) == (TeamSync.Status.IN_SYNC, in_sync.generation)


def test_it_does_not_provision_a_team_that_is_not_on_the_cluster(admin_client, vision, charlie):
    response = _post(admin_client, vision, [{"user": charlie}])
    assert response.status_code == 302
    assert not TeamSync.objects.filter(team=vision).exists()


def test_the_team_list_shows_each_teams_sync_status(admin_client, vision, nlp, in_sync):
    TeamSync.objects.filter(team=vision).update(
        status=TeamSync.Status.FAILING, last_error='quota "gpu-quota" is forbidden'
    )
    page = admin_client.get("/admin/teams/team/").content.decode()
    assert "Failing: quota &quot;gpu-quota&quot; is forbidden" in page
    assert "Not provisioned yet" in page  # nlp


MANAGEMENT = {
    "memberships-TOTAL_FORMS": "0",
    "memberships-INITIAL_FORMS": "0",
    "memberships-MIN_NUM_FORMS": "0",
    "memberships-MAX_NUM_FORMS": "1000",
}


@pytest.mark.parametrize("slug", ["kube-system", "default"])
def test_the_admin_refuses_a_team_in_a_system_namespace(admin_client, slug):
    response = admin_client.post(
        "/admin/teams/team/add/", {"name": "Sys", "slug": slug, **MANAGEMENT}
    )
    assert response.status_code == 200
    assert "The portal never uses namespace" in response.content.decode()
    assert response.context["adminform"].form.errors["slug"] == [
        f"The portal never uses namespace {slug}: {slug} is a Kubernetes system namespace."
    ]
    assert not Team.objects.filter(slug=slug).exists()


def test_the_admin_refuses_a_new_slug_naming_a_system_namespace(admin_client, vision, alice):
    vision.slug = "kube-system"
    response = _post(admin_client, vision, [{"user": alice}])
    assert response.status_code == 200
    assert "kube-system is a Kubernetes system namespace" in response.content.decode()
    assert Team.objects.get(pk=vision.pk).slug == "vision"
