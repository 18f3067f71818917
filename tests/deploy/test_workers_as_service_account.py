# ruff: noqa: F811 - the batch and provisioning fixtures, imported, are parameters here
"""Real Celery worker processes and real Redis, the portal's ServiceAccount on
kubesim with RBAC enforced and deploy/'s ClusterRole (tests/provisioning/conftest.py):
provisioning, a batch Job's creation, release and run, and the GPU inventory all
work, every request the workers make is the ServiceAccount's, and none is refused."""

from urllib.parse import urlsplit

import pytest
from django.db.models import F

from batch import actions as batch_actions
from batch import launch
from batch.models import BatchJob, JobSync
from cluster.models import FlavorCapacity, GpuNode
from portal.celery import app
from tests.batch.conftest import open_now  # noqa: F401 - fixture
from tests.batch.test_cluster import status_of
from tests.batch.test_cluster import submit as submit_job
from tests.factories import TeamFactory
from tests.provisioning.conftest import (  # noqa: F401 - fixtures
    demo_flavors,
    redis_url,
    workers,
)
from tests.provisioning.test_worker_sync import KINDS, approve_now, caps, hard, in_sync
from tests.waiting import wait_for

pytestmark = pytest.mark.celery


def assert_all_done_as_the_portal(backend):
    """The workers' requests were the ServiceAccount's (the test's own reads are a
    cluster admin's), and none was refused."""
    requests = backend.requests()
    assert {r.get("user") for r in requests} - {backend.admin_user} == {backend.portal_user}
    assert {r.get("user") for r in backend.writes()} <= {backend.portal_user}
    assert [r for r in requests if r["status"] in (401, 403)] == []


def test_a_worker_provisions_a_team_as_the_service_account(workers, backend, cluster, demo_flavors):
    workers.start()
    backend.clear_requests()
    vision = TeamFactory(slug="vision")
    approve_now(vision, demo_flavors["h100"], gpus=4)

    wait_for(lambda: in_sync(vision), timeout=20)
    assert hard(cluster, "vision") == caps("4")
    for kind in KINDS:
        assert len(cluster.list(kind, label_selector="gpu-portal.io/team=vision")) == 1, kind
    # The team's members get `edit` there: granted by a ServiceAccount without `edit`'s rights.
    assert cluster.get("RoleBinding", "gpu-portal-team", "vision")["roleRef"]["name"] == "edit"
    assert_all_done_as_the_portal(backend)


def test_a_worker_creates_releases_and_follows_a_batch_job_as_the_service_account(
    open_now, workers, backend, cluster, demo_flavors
):
    workers.start()
    backend.clear_requests()
    job = submit_job(open_now, demo_flavors["h100"])
    batch_actions.replan(reason="test")
    name = BatchJob.objects.get(pk=job.pk).kubernetes_name

    def synced():
        return not JobSync.objects.filter(generation__gt=F("synced_generation")).exists()

    wait_for(lambda: synced() and cluster.get("Job", name, "vision"), timeout=20)
    assert cluster.get("Job", name, "vision")["spec"]["suspend"] is True

    assert launch.release_due() == [job.pk]
    wait_for(lambda: cluster.get("Job", name, "vision")["spec"]["suspend"] is False, timeout=20)
    # The namespace (and its quota, grown by the batch allotment) came with it.
    assert hard(cluster, "vision")["requests.nvidia.com/gpu"] == "2"

    wait_for(
        lambda: status_of(job) == BatchJob.Status.RUNNING,
        timeout=30,
        interval=0.3,
        every=lambda: app.send_task("batch.watch"),
    )
    assert_all_done_as_the_portal(backend)


def test_a_worker_takes_the_inventory_as_the_service_account(
    workers, backend, cluster, demo_flavors
):
    workers.start()
    backend.clear_requests()
    app.send_task("cluster.record_inventory")

    wait_for(lambda: FlavorCapacity.objects.filter(flavor__slug="h100").exists(), timeout=20)
    assert FlavorCapacity.objects.get(flavor__slug="h100").devices == 16
    assert GpuNode.objects.filter(gpu_model="NVIDIA-H100-80GB-HBM3").count() == 2
    assert_all_done_as_the_portal(backend)


@pytest.mark.kubesim_tls
def test_a_worker_in_a_pod_uses_the_mounted_service_account_token(
    workers, backend, cluster, demo_flavors, tmp_path
):
    """No kubeconfig: a worker finds the API server and its credentials as a pod
    does (KUBERNETES_SERVICE_HOST/PORT, the mounted token and CA), over HTTPS."""
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    account = backend.portal_user.split(":")  # system:serviceaccount:NS:NAME
    (mounted / "token").write_text(backend.service_account_token(*account[2:]))
    (mounted / "ca.crt").write_bytes(backend.ca_pem)
    (mounted / "namespace").write_text(account[2])
    server = urlsplit(backend.url)
    workers.start(
        PORTAL_KUBECONFIG="",
        KUBECONFIG="",
        KUBERNETES_SERVICE_HOST=server.hostname,
        KUBERNETES_SERVICE_PORT=str(server.port),
        PORTAL_SERVICE_ACCOUNT_DIR=str(mounted),
    )
    backend.clear_requests()
    vision = TeamFactory(slug="vision")
    approve_now(vision, demo_flavors["h100"], gpus=4)

    wait_for(lambda: in_sync(vision), timeout=20)
    assert hard(cluster, "vision") == caps("4")
    assert_all_done_as_the_portal(backend)
