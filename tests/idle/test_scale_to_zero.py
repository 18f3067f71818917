"""A notebook Deployment idle under a 10-minute policy with a 5-minute grace
(the history in Prometheus, stepped minute by minute) is announced, scaled to
zero with its replicas kept (its ReplicaSet's pods go), and brought back from
the API (they come back); one active in its grace is left alone, and one a
member annotated as exempt with kubectl is not. On kubesim and on the real API
server alike."""

import logging
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from idle import actions
from idle.models import IdleAction, IdleState
from idle.workloads import IGNORED_EXEMPTION, PREVIOUS_REPLICAS
from provisioning import manifests
from tests.billing.ledger import meter, workload
from tests.idle.conftest import at, log, run
from tests.provisioning.conftest import _database_url
from tests.provisioning.test_namespace_usage import KUBECTL
from tests.waiting import wait_for


def deployment(name, replicas, annotations=None):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "vision", "annotations": annotations or {}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "jupyter/base-notebook"}]},
            },
        },
    }


@pytest.fixture
def deployments(cluster):
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}},
        field_manager="tests",
    )
    cluster.apply(deployment("notebook", 2), field_manager="tests")
    cluster.apply(deployment("infer", 1), field_manager="tests")
    return cluster


def live_pods(cluster, deployment):
    """The Deployment's pods not being deleted, found through the ownerReferences
    chain Deployment -> ReplicaSet -> Pod, as the controllers set it."""
    uid = cluster.get("Deployment", deployment, "vision")["metadata"]["uid"]
    replica_sets = {
        rs["metadata"]["uid"]
        for rs in cluster.call("GET", "/apis/apps/v1/namespaces/vision/replicasets")["items"]
        if any(r["uid"] == uid and r.get("controller") for r in rs["metadata"]["ownerReferences"])
    }
    return [
        pod["metadata"]["name"]
        for pod in cluster.list("Pod", namespace="vision")
        if not pod["metadata"].get("deletionTimestamp")
        and any(r["uid"] in replica_sets for r in pod["metadata"].get("ownerReferences") or ())
    ]


def test_an_idle_notebook_is_announced_scaled_to_zero_and_brought_back(
    prometheus, deployments, admin_user, alice, client, h100, vision
):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    wait_for(lambda: len(live_pods(deployments, "notebook")) == 2, timeout=60)
    run(range(1, 17))
    notebook = deployments.get("Deployment", "notebook", "vision")
    assert notebook["spec"]["replicas"] == 0
    wait_for(lambda: not live_pods(deployments, "notebook"), timeout=60)
    assert notebook["metadata"]["annotations"][PREVIOUS_REPLICAS] == "2"
    assert deployments.get("Deployment", "infer", "vision")["spec"]["replicas"] == 1
    rows = [row for row in log() if row[1] in ("notebook", "infer")]
    assert rows == [
        ("Deployment", "infer", "announced", at(11)),
        ("Deployment", "notebook", "announced", at(11)),
        ("Deployment", "infer", "withdrawn", at(13)),
        ("Deployment", "notebook", "scaled_to_zero", at(16)),
    ]
    run([17, 18])  # a retry writes nothing more
    assert [r for r in log() if r[1] == "notebook"][-1][2] == "scaled_to_zero"

    client.force_login(alice)
    states = client.get("/api/v1/idle-states/").json()["results"]
    state = next(s for s in states if s["name"] == "notebook")
    assert state["acted_at"] is not None
    response = client.post(
        f"/api/v1/idle-states/{state['id']}/bring-back/", content_type="application/json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["replicas"] == 2
    notebook = deployments.get("Deployment", "notebook", "vision")
    assert notebook["spec"]["replicas"] == 2
    assert PREVIOUS_REPLICAS not in (notebook["metadata"].get("annotations") or {})
    wait_for(lambda: len(live_pods(deployments, "notebook")) == 2, timeout=60)
    assert not IdleState.objects.filter(name="notebook").exists()
    scaled = IdleAction.objects.get(workload_name="notebook", kind="scaled_to_zero")
    assert scaled.ended_at is not None and scaled.gpu_seconds > 0
    assert IdleAction.objects.filter(workload_name="notebook", kind="restored").exists()
    again = client.post(
        f"/api/v1/idle-states/{state['id']}/bring-back/", content_type="application/json"
    )
    assert again.status_code == 404
    (saving,) = client.get("/api/v1/idle-savings/?month=2026-11").json()
    # 2 GPUs from the scale-down to "Bring it back" (real time since the history's).
    given_back = 2 * (scaled.ended_at - scaled.at).total_seconds() / 3600
    assert abs(float(saving["given_back_gpu_hours"]) - given_back) < 0.001


def kubectl_as_member(backend, tmp_path, *args):
    """kubectl as alice, a member of vision: in the team's group, which the team's
    RoleBinding grants `edit` in its namespace, as the sync makes it."""
    kubeconfig = backend.user_kubeconfig("alice", ["gpu-team-vision"], Path(tmp_path / "alice"))
    return subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig, "-n", "vision", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_a_members_exemption_annotation_exempts_nothing(
    prometheus, backend, deployments, admin_user, h100, vision, tmp_path, caplog
):
    """The annotation earlier versions read as a manager's exemption: a member
    writes it with their own credentials (they may: `edit`), and the notebook is
    still announced and scaled to zero, with a warning in the worker's log."""
    deployments.apply(
        manifests.role_binding(
            "vision", "vision", manifests.group_subjects(["gpu-team-vision"]), "edit"
        ),
        field_manager="tests",
    )
    until = (timezone.now() + timedelta(days=1)).isoformat()
    annotated = kubectl_as_member(
        backend, tmp_path, "annotate", "deployment", "notebook", f"{IGNORED_EXEMPTION}={until}"
    )
    assert annotated.returncode == 0, annotated.stderr
    notebook = deployments.get("Deployment", "notebook", "vision")
    assert notebook["metadata"]["annotations"][IGNORED_EXEMPTION] == until
    # A member cannot make the exemption the portal honours: that is a manager's.
    assert kubectl_as_member(backend, tmp_path, "auth", "can-i", "patch", "namespace").returncode

    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    with caplog.at_level(logging.WARNING, logger="idle.workloads"):
        run(range(1, 17))
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 0
    assert [row for row in log() if row[1] == "notebook"] == [
        ("Deployment", "notebook", "announced", at(11)),
        ("Deployment", "notebook", "scaled_to_zero", at(16)),
    ]
    assert any(
        IGNORED_EXEMPTION in record.getMessage() and "vision/notebook" in record.getMessage()
        for record in caplog.records
    )


def test_a_managers_exemption_leaves_the_notebook_alone(
    prometheus, deployments, admin_user, carol, h100, vision
):
    """The only exemption: a manager's, made through the portal (a row, audited)."""
    actions.exempt(
        vision,
        namespace="vision",
        kind="Deployment",
        name="notebook",
        until=timezone.now() + timedelta(days=1),
        reason="Demo on Friday",
        by=carol,
    )
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    run(range(1, 17))
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
    assert not [row for row in log() if row[1] == "notebook"]


def test_report_only_scales_nothing(prometheus, deployments, admin_user, h100, vision):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report")
    run(range(1, 21))
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
    would = IdleAction.objects.get(workload_name="notebook", kind="would_act")
    assert would.gpu_hours(at(20)) == 2 * 4 / 60


def test_the_report_card_shows_the_notice_and_brings_it_back(
    prometheus, deployments, admin_user, alice, client, h100, vision
):
    meter(
        at(0),
        workloads={(vision, "vision", "Deployment", "notebook", h100): workload(7200, 0, 7200)},
    )
    card = "/billing/teams/vision/workloads/vision/Deployment/notebook/"
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    client.force_login(alice)
    run(range(1, 12))
    page = client.get(card).content.decode()
    assert 'id="idle-banner"' in page and "the idle policy acts at" in page
    run(range(12, 17))
    page = client.get(card).content.decode()
    assert "Scaled to zero for being idle" in page and "Bring it back" in page
    state = IdleState.objects.get(name="notebook")
    response = client.post(f"/idle/states/{state.pk}/bring-back/", follow=True)
    assert "Deployment notebook is back: 2 replica(s)." in response.content.decode()
    assert 'id="idle-banner"' not in response.content.decode()
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2


@pytest.mark.kubesim_only("it slows the PATCH down with kubesim's fault injection")
def test_the_scale_down_is_made_after_the_decision_is_committed(
    transactional_db, prometheus, backend, deployments, admin_user, h100, vision
):
    """The decision (the state's `acted_at`) is committed before the PATCH, which
    runs with no row locked; its outcome is recorded after it."""
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    run(range(1, 16))
    backend.faults(latency_ms=3000, methods=["PATCH"], paths="/deployments/notebook$")
    evaluation = threading.Thread(target=lambda: (run([16]), connection.close()))
    evaluation.start()
    try:
        decided = wait_for(
            lambda: IdleState.objects.filter(name="notebook", acted_at=at(16)).exists(),
            timeout=10,
        )
        assert decided
        # While the PATCH is on its way: no row locked, nothing scaled, no outcome yet.
        with transaction.atomic():
            IdleState.objects.select_for_update(nowait=True).get(name="notebook")
        assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
        assert not IdleAction.objects.filter(workload_name="notebook", kind="scaled_to_zero")
    finally:
        evaluation.join(timeout=30)
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 0
    scaled = IdleAction.objects.get(workload_name="notebook", kind="scaled_to_zero")
    assert scaled.at == at(16) and scaled.detail.startswith("Scaled to zero from 2 replica(s)")


@pytest.mark.kubesim_only("it holds the PATCH back with kubesim's fault injection")
def test_a_scale_down_whose_worker_died_is_made_by_a_later_minute(
    transactional_db, prometheus, backend, deployments, admin_user, h100, vision
):
    """The worker evaluating minute 16 is killed after committing its decision and
    before its PATCH lands: nothing is scaled and no outcome recorded. Five minutes
    on, a later minute finds the decision without an outcome and makes it."""
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    run(range(1, 16))
    # The PATCH is held for a minute, then its connection dropped: never applied.
    backend.faults(
        latency_ms=60_000, drop_rate=1.0, methods=["PATCH"], paths="/deployments/notebook$"
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import django, sys; django.setup(); from idle import actions; "
            "from datetime import datetime; actions.evaluate(datetime.fromisoformat(sys.argv[1]))",
            at(16).isoformat(),
        ],
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "DATABASE_URL": _database_url(),
            "PORTAL_KUBECONFIG": backend.kubeconfig,
            "PORTAL_PROMETHEUS_URL": prometheus,
        },
    )
    try:
        assert wait_for(
            lambda: IdleState.objects.filter(name="notebook", acted_at=at(16)).exists(),
            timeout=60,
        )
    finally:
        worker.kill()
        worker.wait(timeout=10)
    backend.faults()

    run(range(17, 21))  # the PATCH may still be on its way: left alone
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
    assert not IdleAction.objects.filter(workload_name="notebook", kind="scaled_to_zero")

    run([21])
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 0
    scaled = IdleAction.objects.get(workload_name="notebook", kind="scaled_to_zero")
    assert scaled.at == at(21) and scaled.detail.startswith("Scaled to zero from 2 replica(s)")
    run([22, 27])  # made: not made again
    assert IdleAction.objects.filter(workload_name="notebook", kind="scaled_to_zero").count() == 1
