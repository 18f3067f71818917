"""Provisioning end to end: real Celery workers, real Redis, kubesim over HTTP."""

import time
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.db.models import F
from django.utils import timezone

from cluster import tasks
from cluster.models import NamespaceQuota
from gpu_requests import actions as quota_actions
from provisioning import actions
from provisioning.manifests import example_job
from provisioning.models import TeamSync
from teams.models import AuditEvent
from tests.factories import TeamFactory, UserFactory, add_member, make_reviewer, submit
from tests.provisioning.conftest import _use_broker, wait_for

pytestmark = pytest.mark.celery

KINDS = ["Namespace", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy"]


def caps(gpus):
    """The quota the demo catalog gives a team holding `gpus` whole GPUs: every
    other resource name of the catalog is capped at zero."""
    return {
        "requests.nvidia.com/gpu": gpus,
        "requests.nvidia.com/mig-1g.10gb": "0",
        "requests.nvidia.com/mig-3g.40gb": "0",
    }


def hard(cluster, namespace):
    quota = cluster.get("ResourceQuota", "gpu-quota", namespace)
    return None if quota is None else quota["spec"]["hard"]


def in_sync(*teams):
    return TeamSync.objects.filter(team__in=teams, status=TeamSync.Status.IN_SYNC).filter(
        generation__lte=F("synced_generation")
    ).count() == len(teams)


def approve_now(team, flavor, gpus=4, hours=24):
    admin = make_reviewer("admin")
    member = add_member(team, UserFactory(username=f"{team.slug}-member"))
    quota_request = submit(team, flavor, member, gpus=gpus, starts_at=timezone.now(), hours=hours)
    return quota_actions.approve(quota_request, by=admin)


def test_approval_provisions_every_object_within_seconds(workers, cluster, demo_flavors):
    workers.start()
    vision = TeamFactory(slug="vision")
    approve_now(vision, demo_flavors["h100"], gpus=4)

    wait_for(lambda: in_sync(vision), timeout=10)
    assert hard(cluster, "vision") == caps("4")
    namespace = cluster.get("Namespace", "vision")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert cluster.get("LimitRange", "gpu-portal-defaults", "vision") is not None
    binding = cluster.get("RoleBinding", "gpu-portal-team", "vision")
    assert binding["subjects"][0]["name"] == "gpu-team-vision"
    assert binding["roleRef"]["name"] == "edit"
    assert cluster.get("NetworkPolicy", "gpu-portal-default-deny-ingress", "vision") is not None


def test_activation_and_expiry_change_the_cap(workers, cluster, demo_flavors):
    workers.start()
    vision = TeamFactory(slug="vision")
    admin = make_reviewer("admin")
    alice = add_member(vision, UserFactory(username="alice"))
    tomorrow = timezone.now().replace(microsecond=0) + timedelta(days=1)
    quota_request = submit(vision, demo_flavors["h100"], alice, gpus=3, starts_at=tomorrow, hours=2)
    quota_actions.approve(quota_request, by=admin)
    # Approved but not started: the namespace exists and the cap is an explicit zero.
    wait_for(lambda: hard(cluster, "vision") == caps("0"))

    with time_machine.travel(tomorrow + timedelta(minutes=1), tick=False):
        assert quota_actions.advance_lifecycle() == {"activated": 1, "expired": 0}
    wait_for(lambda: hard(cluster, "vision") == caps("3"))

    with time_machine.travel(tomorrow + timedelta(hours=2), tick=False):
        assert quota_actions.advance_lifecycle() == {"activated": 0, "expired": 1}
    wait_for(lambda: hard(cluster, "vision") == caps("0"))


def test_a_second_sync_writes_nothing(workers, backend, cluster, demo_flavors):
    workers.start()
    vision = TeamFactory(slug="vision")
    approve_now(vision, demo_flavors["h100"])
    wait_for(lambda: in_sync(vision))
    backend.clear_requests()

    assert actions.sync_team(vision.pk, force=True) == 0
    actions.sweep()
    actions.check_drift()
    wait_for(lambda: in_sync(vision))

    assert backend.writes() == []
    assert {r["method"] for r in backend.requests()} == {"GET"}


def test_the_sweep_sends_marked_teams_in_batches_and_a_worker_syncs_them(
    workers, backend, cluster, settings, demo_flavors
):
    """Teams marked while no message reached a worker (a broker restart): one
    sweep queues them PORTAL_SYNC_BATCH to a message, and the worker's batch
    syncs each of them."""
    settings.PORTAL_SYNC_BATCH = 3
    teams = [TeamFactory(slug=f"batch-{n}") for n in range(7)]
    for team in teams:
        actions.mark_dirty(team.pk)
    assert sorted(actions.sweep()) == sorted(team.pk for team in teams)
    workers.start()
    wait_for(lambda: in_sync(*teams), timeout=60)
    assert workers.logs().count("Task provisioning.sync_teams[") >= 3  # 3 + 3 + 1
    assert "Task provisioning.sync_team[" not in workers.logs()


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_every_team_converges_with_30_percent_of_calls_failing(
    workers, backend, cluster, demo_flavors
):
    workers.start("w1")
    workers.start("w2")
    backend.faults(error_rate=0.3, statuses=[500, 503, 429], retry_after=1)
    teams = [TeamFactory(slug=f"team-{n}") for n in range(8)]
    for n, team in enumerate(teams):
        approve_now(team, demo_flavors["l4"], gpus=1 + n % 3)

    wait_for(lambda: in_sync(*teams), timeout=60, interval=0.5, every=actions.sweep)

    backend.clear_faults()
    for n, team in enumerate(teams):
        assert hard(cluster, team.slug) == caps(str(1 + n % 3))
    failed = [r for r in backend.requests() if r["status"] in (500, 503, 429)]
    assert failed, "the faults were injected"


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_a_worker_killed_mid_sync_is_replaced_and_the_team_converges(
    workers, backend, cluster, demo_flavors
):
    first = workers.start("w1")
    vision = TeamFactory(slug="vision")
    # Every API call takes 0.7 s: the sync is still going when the worker dies.
    backend.faults(latency_ms=700)
    approve_now(vision, demo_flavors["h100"], gpus=2)
    wait_for(lambda: any("/vision" in r["path"] for r in backend.requests()), timeout=10)
    time.sleep(1.0)
    workers.kill(first)
    assert not in_sync(vision)

    backend.clear_faults()
    workers.start("w2")
    # The dead worker's claim runs out (lease 3 s); the sweep queues the team again.
    wait_for(lambda: in_sync(vision), timeout=30, interval=0.3, every=actions.sweep)

    for kind in KINDS:
        found = cluster.list(kind, label_selector="gpu-portal.io/team=vision")
        assert len(found) == 1, kind
    assert hard(cluster, "vision") == caps("2")


def test_drift_is_repaired_and_recorded(workers, backend, cluster, demo_flavors):
    workers.start()
    vision = TeamFactory(slug="vision")
    approve_now(vision, demo_flavors["h100"], gpus=4)
    wait_for(lambda: in_sync(vision))

    # Someone runs `kubectl edit resourcequota` and deletes the network policy.
    cluster.call(
        "PATCH",
        cluster.path("ResourceQuota", "gpu-quota", "vision"),
        body={"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}},
        content_type="application/merge-patch+json",
    )
    cluster.delete("NetworkPolicy", "gpu-portal-default-deny-ingress", "vision")

    assert actions.check_drift() == [vision.pk]
    wait_for(lambda: hard(cluster, "vision") == caps("4"))
    wait_for(lambda: cluster.get("NetworkPolicy", "gpu-portal-default-deny-ingress", "vision"))
    wait_for(lambda: in_sync(vision))
    reasons = list(
        AuditEvent.objects.filter(team=vision, action="drift_repaired").values_list(
            "reason", flat=True
        )
    )
    assert "ResourceQuota gpu-quota was changed outside the portal " in reasons[0]
    assert "requests.nvidia.com/gpu: 64 -> 4" in reasons[0]
    assert any("NetworkPolicy" in r and "deleted" in r for r in reasons)


def test_a_decision_made_while_redis_is_down_reaches_the_cluster(
    workers, redis_url, cluster, demo_flavors
):
    from portal.celery import app

    workers.start()
    vision = TeamFactory(slug="vision")
    _use_broker(app, "redis://127.0.0.1:9/0")  # nothing listens there: the broker is down
    try:
        quota_request = approve_now(vision, demo_flavors["h100"], gpus=2)
    finally:
        _use_broker(app, redis_url)
    # The decision stands, and the database remembers the team is not synced yet.
    quota_request.refresh_from_db()
    assert quota_request.status == "active"
    assert TeamSync.objects.get(team=vision).status == TeamSync.Status.PENDING
    assert hard(cluster, "vision") is None

    # Once the broker is back, the beat's sweep queues it.
    wait_for(lambda: in_sync(vision), timeout=20, interval=0.3, every=actions.sweep)
    assert hard(cluster, "vision") == caps("2")


def test_a_worker_whose_database_connection_was_cut_carries_on(workers, cluster, demo_flavors):
    if connection.vendor != "postgresql":
        pytest.skip("cutting a connection takes PostgreSQL's pg_terminate_backend")
    workers.start()
    vision, nlp = TeamFactory(slug="vision"), TeamFactory(slug="nlp")
    approve_now(vision, demo_flavors["h100"], gpus=2)
    wait_for(lambda: in_sync(vision))

    # The worker keeps its connection between tasks; cut it, as a database
    # restart or a proxy timeout would.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchall(), "the worker had a connection to cut"
    approve_now(nlp, demo_flavors["h100"], gpus=3)

    wait_for(lambda: in_sync(nlp), timeout=20, interval=0.3, every=actions.sweep)
    assert hard(cluster, "nlp") == caps("3")


def hard_used(cluster):
    status = cluster.get("ResourceQuota", "gpu-quota", "vision")["status"]
    key = "requests.nvidia.com/gpu"
    return status["hard"].get(key), status["used"].get(key)


def test_the_inventory_task_in_a_worker_records_use_and_refusals(workers, cluster, demo_flavors):
    """The beat's inventory task, run by a worker: the namespace's quota, what its
    pods use and the pods it refused reach the database the dashboard reads."""
    workers.start()
    vision = TeamFactory(slug="vision")
    h100 = demo_flavors["h100"]
    approve_now(vision, h100, gpus=2)
    wait_for(lambda: in_sync(vision), timeout=10)
    job = example_job(
        namespace="vision",
        flavor_slug="h100",
        resource_name=h100.resource_name,
        node_selector=h100.node_selector,
        tolerations=h100.tolerations,
    )
    job["spec"].update(parallelism=3, completions=3)
    job["spec"]["template"]["metadata"] = {"annotations": {"kubesim.io/duration": "1h"}}
    cluster.apply(job, field_manager="test")

    # The cluster first: the third pod refused, and the two admitted ones counted.
    wait_for(
        lambda: cluster.list("Event", namespace="vision", field_selector="reason=FailedCreate")
    )
    wait_for(lambda: hard_used(cluster) == ("2", "2"))
    tasks.record_inventory.delay()
    row = wait_for(
        lambda: NamespaceQuota.objects.filter(team=vision, resource_name="nvidia.com/gpu").first()
    )
    assert (row.hard, row.used, row.refusing) == (2, 2, True)
    assert "exceeded quota: gpu-quota" in row.refused_message
