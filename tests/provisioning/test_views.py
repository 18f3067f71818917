"""The cluster pages: reviewers only; archive and namespace deletion confirm first."""

import pytest

from cluster.actions import record_inventory
from provisioning import actions
from provisioning.models import TeamSync
from teams.models import Team


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)


def test_it_shows_sync_status_inventory_and_nodes(
    client, admin_user, vision, cluster, demo_flavors
):
    actions.mark_dirty(vision.pk)
    record_inventory()
    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    assert "Pending" in page
    assert "gpu-h100-0" in page
    assert "nvidia.com/gpu:NoSchedule" in page
    assert "A100, H100, L4, T4 share the Kubernetes resource <code>nvidia.com/gpu</code>" in page


def test_members_get_403(client, alice):
    client.force_login(alice)
    assert client.get("/cluster/").status_code == 403
    assert client.post("/cluster/teams/vision/archive/").status_code == 403


def test_archive_asks_first_then_archives(client, admin_user, vision):
    client.force_login(admin_user)
    assert "Archive Vision?" in client.get("/cluster/teams/vision/archive/").content.decode()
    response = client.post("/cluster/teams/vision/archive/", {"reason": "project over"})
    assert response.status_code == 302
    assert Team.objects.get(pk=vision.pk).archived_at is not None


def test_deleting_a_namespace_needs_its_name_typed(client, admin_user, vision, cluster):
    client.force_login(admin_user)
    client.post("/cluster/teams/vision/archive/")
    actions.sync_team(vision.pk)

    wrong = client.post("/cluster/teams/vision/delete-namespace/", {"confirm": "yes"})
    assert wrong.status_code == 400
    assert cluster.get("Namespace", "vision") is not None

    right = client.post("/cluster/teams/vision/delete-namespace/", {"confirm": "vision"})
    assert right.status_code == 302
    assert TeamSync.objects.get(team=vision).namespace_deleted_at is not None


def test_it_shows_teams_not_on_the_cluster_yet(client, admin_user, vision):
    client.force_login(admin_user)
    response = client.get("/cluster/")
    assert response.status_code == 200
    assert "Not provisioned yet" in response.content.decode()


def test_archive_refuses_an_oversized_reason(client, admin_user, vision):
    client.force_login(admin_user)
    response = client.post("/cluster/teams/vision/archive/", {"reason": "x" * 2001})
    assert response.status_code == 400
    assert "Keep the reason to 2,000 characters." in response.content.decode()
    assert Team.objects.get(pk=vision.pk).archived_at is None
