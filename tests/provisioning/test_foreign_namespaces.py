"""Namespaces the portal never takes as a team's, on both cluster backends: a
Kubernetes system namespace, the portal's own, and any namespace that exists
without the labels the portal gives the namespace it makes for the team.

Team creation refuses them (the live namespace read through the hook
provisioning registers); a database row that names one anyway (made before
the rule, or by hand) gets a sync that reads the namespace before its first
write and fails, shown on the team and audited, with nothing written; a
namespace whose labels were taken off is not labelled back; an archived
team's namespace is deleted only if it is still the team's, unchanged since
it was read; and the portal's client sends no write into a reserved
namespace whatever asks it to.
"""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from cluster import kube
from gpu_requests import actions as quota_actions
from provisioning import actions
from provisioning.models import TeamSync
from teams import actions as team_actions
from teams import errors
from teams.models import AuditEvent, Team
from tests.factories import TeamFactory, submit
from tests.provisioning.conftest import sync_of
from tests.provisioning.test_actions import objects_per_team

OURS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}
MERGE_PATCH = "application/merge-patch+json"


@pytest.fixture(autouse=True)
def queued(monkeypatch):
    """Syncs are run by the test (no worker)."""
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)


@pytest.fixture
def vision_quota(
    vision, alice, demo_flavors, admin_user, eager, django_capture_on_commit_callbacks
):
    """Vision holds 4 H100 (not synced yet)."""
    with django_capture_on_commit_callbacks(execute=True):
        quota_request = submit(
            vision, demo_flavors["h100"], alice, gpus=4, starts_at=timezone.now()
        )
        quota_actions.approve(quota_request, by=admin_user)
    return vision


def namespace(cluster, name, labels=None):
    """A namespace made by someone else (a cluster admin, another tool)."""
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        field_manager="someone-else",
    )
    return cluster.get("Namespace", name)


def labels_of(cluster, name):
    return cluster.get("Namespace", name)["metadata"].get("labels") or {}


def portal_requests(backend):
    return [r for r in backend.requests() if r.get("user") == backend.portal_user]


def test_a_new_team_is_refused_a_namespace_that_exists_without_the_portals_labels(
    backend, cluster, admin_user
):
    namespace(cluster, "ml", {"owner": "data-platform"})
    with pytest.raises(ValidationError) as raised:
        team_actions.create_team(name="ML", slug="ml", by=admin_user)
    (message,) = raised.value.message_dict["slug"]
    assert message.startswith(
        "Namespace ml already exists and the portal did not make it for this team"
    )
    assert not Team.objects.filter(slug="ml").exists()
    # Read, not written.
    assert [(r["verb"], r["resource"], r["name"]) for r in portal_requests(backend)] == [
        ("get", "namespaces", "ml")
    ]
    # One the portal made for the team (labelled so) is the team's; none at all too.
    namespace(cluster, "speech", {**OURS, "gpu-portal.io/team": "speech"})
    assert team_actions.create_team(name="Speech", slug="speech", by=admin_user)
    assert team_actions.create_team(name="Audio", slug="audio", by=admin_user)


def test_the_web_form_says_so_on_the_slug(backend, cluster, client, admin_user):
    namespace(cluster, "ml")
    client.force_login(admin_user)
    page = client.post(reverse("team_new"), {"name": "ML", "slug": "ml"}).content.decode()
    assert 'class="field has-error"' in page
    assert "Namespace ml already exists and the portal did not make it" in page


def test_a_row_naming_a_namespace_made_by_someone_else_gets_a_sync_that_writes_nothing(
    vision_quota, backend, cluster
):
    """Vision's row was made before the rule (a factory here): its namespace exists,
    made by someone else. The sync reads it and stops before any write; once a
    cluster admin hands it over (labels it), the next sync takes it."""
    namespace(cluster, "vision", {"owner": "someone-else"})
    backend.clear_requests()
    with pytest.raises(actions.NotTheTeamsNamespace):
        actions.sync_team(vision_quota.pk)

    assert [(r["verb"], r["resource"], r["name"]) for r in portal_requests(backend)] == [
        ("get", "namespaces", "vision")
    ]
    assert labels_of(cluster, "vision").items() >= {"owner": "someone-else"}.items()
    assert not labels_of(cluster, "vision").keys() & OURS.keys()
    assert cluster.get("ResourceQuota", "gpu-quota", "vision") is None
    sync = sync_of(vision_quota)
    assert sync.status == TeamSync.Status.FAILING
    assert sync.last_error.startswith(
        "Namespace vision already exists and the portal did not make it for this team"
    )
    assert sync.last_error_status is None  # the portal's refusal, not the server's
    (event,) = AuditEvent.objects.filter(team=vision_quota, action="sync_failed")
    assert event.reason.startswith("Not synced: Namespace vision already exists")
    assert actions.sweep() == []  # not queued again: trying again changes nothing

    # A cluster admin hands it over: the team's from then on.
    cluster.call(
        "PATCH",
        cluster.path("Namespace", "vision"),
        body={"metadata": {"labels": OURS}},
        content_type=MERGE_PATCH,
    )
    actions.mark_dirty(vision_quota.pk)
    assert actions.sync_team(vision_quota.pk) == objects_per_team(cluster)
    assert sync_of(vision_quota).status == TeamSync.Status.IN_SYNC
    hard = cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "4"


@pytest.mark.parametrize(
    ("prefix", "slug", "name"),
    [
        ("", "default", "default"),
        ("", "kube-system", "kube-system"),
        ("kub", "e-public", "kube-public"),
        ("", "portal", "portal"),
    ],
)
def test_a_row_naming_a_reserved_namespace_is_refused_without_a_call(
    backend, cluster, demo_flavors, settings, prefix, slug, name
):
    settings.PORTAL_NAMESPACE_PREFIX = prefix
    settings.PORTAL_OWN_NAMESPACE = "portal"  # the ServiceAccount's, in both backends
    team = TeamFactory(slug=slug)  # as a row made before the rule would be
    before = cluster.get("Namespace", name)
    backend.clear_requests()
    with pytest.raises(actions.NotTheTeamsNamespace, match=f"never uses namespace {name}"):
        actions.sync_team(team.pk)
    assert portal_requests(backend) == []
    after = cluster.get("Namespace", name)
    assert (after or {}).get("metadata", {}).get("labels") == (before or {}).get(
        "metadata", {}
    ).get("labels")
    assert sync_of(team).status == TeamSync.Status.FAILING


def test_labels_taken_off_the_teams_namespace_are_not_put_back(vision_quota, backend, cluster):
    actions.sync_team(vision_quota.pk)
    # A cluster admin takes the namespace away from the portal.
    cluster.call(
        "PATCH",
        cluster.path("Namespace", "vision"),
        body={"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
        content_type=MERGE_PATCH,
    )
    assert actions.check_drift() == [vision_quota.pk]
    backend.clear_requests()
    with pytest.raises(actions.NotTheTeamsNamespace, match="did not make it for this team"):
        actions.sync_team(vision_quota.pk)
    assert not [r for r in portal_requests(backend) if r["method"] != "GET"]
    assert "app.kubernetes.io/managed-by" not in labels_of(cluster, "vision")
    assert sync_of(vision_quota).status == TeamSync.Status.FAILING


@pytest.fixture
def archived(vision_quota, admin_user, backend):
    actions.sync_team(vision_quota.pk)
    team_actions.archive_team(vision_quota, by=admin_user)
    actions.sync_team(vision_quota.pk)
    return vision_quota


def test_an_archived_teams_namespace_no_longer_its_own_is_not_deleted(
    archived, admin_user, backend, cluster
):
    cluster.call(
        "PATCH",
        cluster.path("Namespace", "vision"),
        body={"metadata": {"labels": {"gpu-portal.io/team": "nlp"}}},
        content_type=MERGE_PATCH,
    )
    backend.clear_requests()
    with pytest.raises(errors.IllegalTransition, match="It is not deleted"):
        actions.delete_namespace(archived, by=admin_user)
    assert [r["verb"] for r in portal_requests(backend)] == ["get"]
    assert not cluster.get("Namespace", "vision")["metadata"].get("deletionTimestamp")
    assert sync_of(archived).namespace_deleted_at is None
    assert not AuditEvent.objects.filter(team=archived, action="delete_namespace").exists()


class RelabelledAfterTheRead:
    """The portal's client, but a cluster admin relabels the namespace right after
    the portal read it: between the check and the DELETE."""

    def __init__(self, portal, admin):
        self.portal, self.admin = portal, admin

    def get(self, kind, name, namespace=None):
        live = self.portal.get(kind, name, namespace)
        self.admin.call(
            "PATCH",
            self.admin.path("Namespace", name),
            body={"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
            content_type=MERGE_PATCH,
        )
        return live

    def delete(self, *args, **kwargs):
        return self.portal.delete(*args, **kwargs)


def test_a_namespace_changed_between_the_check_and_the_delete_is_not_deleted(
    archived, admin_user, cluster
):
    racing = RelabelledAfterTheRead(kube.cluster(), cluster)
    with pytest.raises(errors.IllegalTransition, match="changed while it was being deleted"):
        actions.delete_namespace(archived, by=admin_user, cluster=racing)
    assert not cluster.get("Namespace", "vision")["metadata"].get("deletionTimestamp")
    assert sync_of(archived).namespace_deleted_at is None


def test_the_teams_own_namespace_is_deleted_on_condition_it_is_unchanged(
    archived, admin_user, backend, cluster
):
    live = cluster.get("Namespace", "vision")["metadata"]
    backend.clear_requests()
    assert actions.delete_namespace(archived, by=admin_user) == "vision"
    assert [r["verb"] for r in portal_requests(backend)] == ["get", "delete"]
    gone = cluster.get("Namespace", "vision")
    assert gone is None or gone["metadata"]["uid"] == live["uid"]
    assert gone is None or gone["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize(
    ("write", "namespace"),
    [
        (lambda c: c.apply(_quota("kube-system"), field_manager="gpu-portal"), "kube-system"),
        (lambda c: c.apply(_quota("default"), field_manager="gpu-portal"), "default"),
        (lambda c: c.delete("Namespace", "kube-public"), "kube-public"),
        (lambda c: c.delete("Job", "batch-1", "portal"), "portal"),
        (
            lambda c: c.call(
                "PATCH",
                c.path("Namespace", "default"),
                body={"metadata": {"labels": OURS}},
                content_type=MERGE_PATCH,
            ),
            "default",
        ),
    ],
)
def test_the_portals_client_sends_no_write_into_a_reserved_namespace(
    backend, settings, write, namespace
):
    settings.PORTAL_OWN_NAMESPACE = "portal"
    backend.clear_requests()
    with pytest.raises(kube.ReservedNamespace, match=f"not sent: {namespace} is"):
        write(kube.cluster())
    assert portal_requests(backend) == []
    # Reading is fine.
    assert kube.cluster().get("Namespace", "default") is not None


def _quota(namespace):
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": namespace},
        "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
    }
