"""Provisioning actions run in the test process against both cluster backends over HTTP."""

import contextlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster import kube
from gpu_requests import actions as quota_actions
from gpu_requests.models import QuotaRequest
from provisioning import actions, manifests
from provisioning.models import TeamSync
from teams import actions as team_actions
from teams import errors
from teams.models import AuditEvent, Membership
from teams.namespaces import namespace_of
from tests.factories import TeamFactory, UserFactory, add_member, submit
from tests.provisioning.conftest import sync_of
from tests.waiting import wait_for


@pytest.fixture(autouse=True)
def queued(monkeypatch):
    """Team ids queued for a sync: recorded here, run by the test (no worker)."""
    ids = []
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: ids.extend(team_ids) or team_ids)
    return ids


@pytest.fixture
def approve_now(django_capture_on_commit_callbacks, admin_user):
    def approve(team, flavor, requester, gpus=4):
        with django_capture_on_commit_callbacks(execute=True):
            quota_request = submit(team, flavor, requester, gpus=gpus, starts_at=timezone.now())
            return quota_actions.approve(quota_request, by=admin_user)

    return approve


@pytest.fixture
def vision_quota(vision, alice, demo_flavors, cluster, approve_now):
    """Vision holds 4 H100 and is in sync."""
    approve_now(vision, demo_flavors["h100"], alice)
    actions.sync_team(vision.pk)
    return vision


def test_a_transition_marks_the_team_pending_and_queues_it(
    vision, alice, demo_flavors, approve_now, queued
):
    approve_now(vision, demo_flavors["h100"], alice)
    sync = sync_of(vision)
    assert sync.status == TeamSync.Status.PENDING
    assert sync.generation > sync.synced_generation
    assert set(queued) == {vision.pk}  # approved and activated: two marks, one team


def test_the_sweep_queues_teams_whose_message_was_lost(
    vision, alice, demo_flavors, approve_now, queued
):
    approve_now(vision, demo_flavors["h100"], alice)  # the broker lost this message
    queued.clear()
    actions.sweep()
    assert queued == [vision.pk]


def objects_per_team(cluster):
    """A team's first sync applies five objects, and the flavor policies and their
    bindings where the server serves admission policies (provisioning/policies.py)."""
    served = ("ValidatingAdmissionPolicy", "MutatingAdmissionPolicy")
    return 5 + 2 * sum(cluster.serves(kind) for kind in served)


def test_sync_creates_the_quota_summed_per_resource_name(
    vision, alice, demo_flavors, cluster, approve_now
):
    # H100 and A100 share nvidia.com/gpu: one key caps their sum; MIG has its own.
    for flavor, gpus in (("h100", 4), ("a100", 2), ("a100-1g", 7)):
        approve_now(vision, demo_flavors[flavor], alice, gpus)
    assert actions.sync_team(vision.pk) == objects_per_team(cluster)
    assert cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "6",
        "requests.nvidia.com/mig-1g.10gb": "7",
        # Not granted, so capped: without the key a namespace could use any number.
        "requests.nvidia.com/mig-3g.40gb": "0",
    }
    assert sync_of(vision).status == TeamSync.Status.IN_SYNC


def test_a_team_in_sync_is_not_synced_again(vision_quota, backend):
    backend.clear_requests()
    assert actions.sync_team(vision_quota.pk) is None
    assert backend.requests() == []


def test_a_permanent_error_is_shown_with_the_servers_message_and_not_retried(
    vision_quota, settings, admin_user, client, backend
):
    # The portal may bind only `edit` (deploy/'s role): binding `admin` is an
    # escalation, refused before the (also refused) change of a live roleRef.
    settings.PORTAL_RBAC_CLUSTER_ROLE = "admin"
    actions.mark_dirty(vision_quota.pk)
    with pytest.raises(kube.PermanentClusterError):
        actions.sync_team(vision_quota.pk)

    sync = sync_of(vision_quota)
    assert sync.status == TeamSync.Status.FAILING
    assert sync.last_error_status == 403
    refusal = "is attempting to grant RBAC permissions not currently held"
    assert refusal in sync.last_error
    assert AuditEvent.objects.filter(team=vision_quota, action="sync_failed").count() == 1
    # The sweep does not queue a generation the cluster refused.
    assert actions.sweep() == []

    client.force_login(admin_user)
    page = client.get("/cluster/")
    assert page.status_code == 200
    assert refusal in page.content.decode()


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_a_transient_error_is_recorded_and_left_for_a_retry(vision, backend, cluster, settings):
    settings.PORTAL_KUBE_RETRIES = 0
    kube.reset()
    actions.mark_dirty(vision.pk)
    backend.faults(error_rate=1.0, statuses=[503])
    with pytest.raises(kube.TransientClusterError):
        actions.sync_team(vision.pk)
    sync = sync_of(vision)
    assert sync.status == TeamSync.Status.FAILING
    assert sync.last_error_status == 503
    assert sync.claimed_until is None  # released for the retry


def test_a_change_applies_only_the_object_it_changes_and_reads_nothing(
    vision_quota, alice, demo_flavors, approve_now, backend, cluster
):
    backend.clear_requests()
    approve_now(vision_quota, demo_flavors["h100"], alice, gpus=2)
    assert actions.sync_team(vision_quota.pk) == 1
    requests = backend.requests()
    assert [(r["method"], r["path"].split("?")[0]) for r in requests] == [
        ("PATCH", "/api/v1/namespaces/vision/resourcequotas/gpu-quota")
    ]
    hard = cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "6"


def test_a_claimed_team_is_left_to_its_holder(vision, backend):
    actions.mark_dirty(vision.pk)
    TeamSync.objects.filter(team=vision).update(
        claimed_until=timezone.now() + timezone.timedelta(seconds=60), claim_token="other"
    )
    assert actions.sync_team(vision.pk) is None
    assert backend.requests() == []


def test_rbac_subjects_follow_membership_in_users_mode(vision_quota, alice, settings, cluster):
    settings.PORTAL_RBAC_SUBJECTS = "users"

    def subjects():
        binding = cluster.get("RoleBinding", "gpu-portal-team", "vision")
        return [s["name"] for s in binding["subjects"]]

    assert actions.sweep() == [vision_quota.pk]  # the mode change alone changes the subjects
    actions.sync_team(vision_quota.pk)
    assert subjects() == ["oidc:alice"]

    add_member(vision_quota, UserFactory(username="dave"))
    assert actions.sweep() == [vision_quota.pk]
    actions.sync_team(vision_quota.pk)
    assert subjects() == ["oidc:alice", "oidc:dave"]

    Membership.objects.filter(team=vision_quota, user=alice).delete()
    actions.sweep()
    actions.sync_team(vision_quota.pk)
    assert subjects() == ["oidc:dave"]


def test_archiving_revokes_and_caps_at_zero_but_keeps_the_namespace(
    vision_quota, admin_user, cluster
):
    team_actions.archive_team(vision_quota, by=admin_user)
    actions.sync_team(vision_quota.pk)
    hard = cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"]
    assert set(hard.values()) == {"0"}
    assert "requests.nvidia.com/gpu" in hard
    assert cluster.get("Namespace", "vision") is not None
    assert not QuotaRequest.objects.reserving().filter(team=vision_quota).exists()


def test_only_an_archived_teams_namespace_can_be_deleted(vision_quota, admin_user, cluster):
    with pytest.raises(errors.IllegalTransition, match="Archive the team"):
        actions.delete_namespace(vision_quota, by=admin_user)
    team_actions.archive_team(vision_quota, by=admin_user)
    actions.sync_team(vision_quota.pk)

    assert actions.delete_namespace(vision_quota, by=admin_user) == "vision"
    namespace = cluster.get("Namespace", "vision")
    assert namespace is None or namespace["metadata"].get("deletionTimestamp")
    # No later sync brings it back.
    actions.mark_dirty(vision_quota.pk)
    assert not actions.sync_team(vision_quota.pk)
    assert AuditEvent.objects.filter(team=vision_quota, action="delete_namespace").exists()


def test_members_cannot_archive(vision, alice):
    with pytest.raises(errors.NotAllowed):
        team_actions.archive_team(vision, by=alice)


def test_empty_maps_and_lists_match_what_the_server_leaves_out():
    # ResourceQuotaSpec.hard and RoleBinding.subjects are omitempty on a real server.
    assert actions.matches({"subjects": []}, {"roleRef": {}})
    assert actions.matches({"spec": {"hard": {}}}, {"spec": {}})
    assert not actions.matches({"spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}, {"spec": {}})


def test_team_namespaces_carry_the_operators_labels_and_annotations(
    vision, alice, demo_flavors, cluster, approve_now, settings
):
    settings.PORTAL_NAMESPACE_LABELS = {"networking.example.com/profile": "isolated"}
    settings.PORTAL_NAMESPACE_ANNOTATIONS = {"cost.example.com/center": "ML research #42"}
    approve_now(vision, demo_flavors["h100"], alice)
    actions.sync_team(vision.pk)
    metadata = cluster.get("Namespace", "vision")["metadata"]
    assert metadata["labels"]["networking.example.com/profile"] == "isolated"
    assert metadata["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert metadata["annotations"]["cost.example.com/center"] == "ML research #42"


def test_a_manifest_field_the_server_does_not_know_is_refused_for_good(
    vision, alice, demo_flavors, approve_now, monkeypatch, backend
):
    """A field the API server's schema lacks (a portal newer than the cluster):
    server-side apply answers 500 "field not declared in schema", which is the
    request's fault, not the server's, so the team shows it and nothing retries."""
    built = manifests.team_objects

    def with_a_new_field(**kwargs):
        objects = built(**kwargs)
        for obj in objects:
            if obj["kind"] == "ResourceQuota":
                obj["spec"]["futureField"] = True
        return objects

    monkeypatch.setattr(manifests, "team_objects", with_a_new_field)
    approve_now(vision, demo_flavors["h100"], alice)
    with pytest.raises(kube.PermanentClusterError):
        actions.sync_team(vision.pk)
    sync = sync_of(vision)
    assert (sync.status, sync.last_error_status) == (TeamSync.Status.FAILING, 500)
    assert ".spec.futureField: field not declared in schema" in sync.last_error
    assert actions.sweep() == []  # this generation is not tried again


def test_a_namespace_deleted_outside_the_portal_is_made_again_once_it_has_terminated(
    vision_quota, cluster, backend
):
    # A pod held by a finalizer keeps the deleted namespace Terminating.
    cluster.call(
        "POST",
        "/api/v1/namespaces/vision/pods",
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "held", "finalizers": ["tests.gpu-portal.io/hold"]},
            "spec": {
                # What the namespace's PodSecurity level (restricted) asks of a pod.
                "securityContext": {
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        },
    )
    cluster.delete("Namespace", "vision")
    assert actions.check_drift() == [vision_quota.pk]
    with pytest.raises(kube.TransientClusterError, match="being terminated"):
        actions.sync_team(vision_quota.pk)
    sync = sync_of(vision_quota)
    assert sync.status == TeamSync.Status.FAILING
    assert sync.refused_generation is None or sync.refused_generation < sync.generation

    cluster.call(
        "PATCH",
        cluster.path("Pod", "held", "vision"),
        body={"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    def made_again():
        with contextlib.suppress(kube.TransientClusterError):
            actions.sync_team(vision_quota.pk)
        return sync_of(vision_quota).status == TeamSync.Status.IN_SYNC

    wait_for(made_again, timeout=60, every=lambda: backend.pass_time(30))
    namespace = cluster.get("Namespace", "vision")
    assert namespace["status"]["phase"] == "Active"
    assert (
        cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"][
            "requests.nvidia.com/gpu"
        ]
        == "4"
    )


def test_a_team_in_sync_is_not_drifted(vision_quota, backend):
    """The drift check compares the listed objects: the real API server's list items
    carry no apiVersion or kind, which is no drift."""
    assert actions.check_drift() == []
    assert sync_of(vision_quota).status == TeamSync.Status.IN_SYNC


def test_a_batch_of_teams_is_synced_with_one_claim_and_one_read_of_their_state(
    demo_flavors, cluster, backend, settings
):
    def statements(count, start):
        teams = [
            TeamFactory(slug=f"batch-{n}", name=f"Batch {n}") for n in range(start, start + count)
        ]
        for team in teams:
            actions.mark_dirty(team.pk)
        with CaptureQueriesContext(connection) as captured:
            results = actions.sync_teams([team.pk for team in teams])
        # Five objects each, unread (and the flavor policies where served).
        assert results == {team.pk: objects_per_team(cluster) for team in teams}
        for team in teams:
            assert sync_of(team).status == TeamSync.Status.IN_SYNC
            namespace = namespace_of(team.slug)
            assert cluster.get("ResourceQuota", "gpu-quota", namespace) is not None
        return len(captured)

    few, more = statements(2, 0), statements(5, 2)
    assert more == few  # the claim, the reads and the finish are the batch's, not per team
    assert actions.sync_teams([TeamFactory(slug="idle-batch").pk]) == {}  # nothing marked


def test_a_team_refused_in_a_batch_is_shown_and_the_others_are_synced(
    vision, nlp, demo_flavors, settings, backend, cluster
):
    actions.mark_dirty(vision.pk)
    actions.mark_dirty(nlp.pk)
    built = manifests.team_objects

    def refused_for_vision(**kwargs):
        objects = built(**kwargs)
        if kwargs["team_slug"] == "vision":
            for obj in objects:
                if obj["kind"] == "ResourceQuota":
                    obj["spec"]["futureField"] = True
        return objects

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifests, "team_objects", refused_for_vision)
        results = actions.sync_teams([vision.pk, nlp.pk])
    assert isinstance(results[vision.pk], kube.PermanentClusterError)
    assert results[nlp.pk] == objects_per_team(cluster)
    assert sync_of(vision).status == TeamSync.Status.FAILING
    assert sync_of(vision).claimed_until is None  # released
    assert sync_of(nlp).status == TeamSync.Status.IN_SYNC


def test_a_team_changed_while_its_batch_syncs_is_left_pending_for_its_own_message(
    vision, nlp, demo_flavors, backend, cluster
):
    actions.mark_dirty(vision.pk)
    actions.mark_dirty(nlp.pk)
    built = manifests.team_objects

    def vision_changes_meanwhile(**kwargs):
        if kwargs["team_slug"] == "vision":
            actions.mark_dirty(vision.pk)  # an approval lands while the batch runs
        return built(**kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifests, "team_objects", vision_changes_meanwhile)
        results = actions.sync_teams([vision.pk, nlp.pk])
    assert results == {vision.pk: None, nlp.pk: objects_per_team(cluster)}
    left = sync_of(vision)
    assert left.status == TeamSync.Status.PENDING
    assert left.generation > left.synced_generation  # the new change is still to do
    assert left.claimed_until is None and left.applied  # released; what was applied is kept
    assert sync_of(nlp).status == TeamSync.Status.IN_SYNC
    assert actions.sync_team(vision.pk) == 0  # its own sync: nothing changed on the cluster
    assert sync_of(vision).status == TeamSync.Status.IN_SYNC
