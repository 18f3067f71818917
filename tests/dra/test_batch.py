"""Batch jobs of a DRA flavor on the real control plane: planned suspended with
a ResourceClaimTemplate owned by the Job, released, the real scheduler allocates
each pod's claim from the published slices, the job succeeds; cancelling deletes
the Job and the garbage collector its template."""

from datetime import timedelta

import pytest
from django.utils import timezone

from batch import actions, manifests
from batch import cluster as batch_cluster
from batch.models import BatchJob, ImageRule
from cluster import actions as cluster_actions
from cluster import kube
from gpu_requests.models import Membership, Team
from tests.batch.test_cluster import status_of, submit, watch_until
from tests.dra import objects
from tests.dra.test_cluster import REAL, dra_flavor, published  # noqa: F401 (fixture)
from tests.factories import UserFactory, make_reviewer
from tests.provisioning.conftest import eager  # noqa: F401 (fixture)
from tests.waiting import wait_for

Status = BatchJob.Status
pytestmark = REAL


@pytest.fixture
def dra_setup(transactional_db, backend, cluster, published, eager):  # noqa: F811
    """alice of vision; an H100 DRA flavor counted from the slices (two devices); a
    window open now for two hours setting both aside."""
    flavor = dra_flavor("h100-dra", selector=objects.H100_ONLY)
    cluster_actions.record_inventory()
    flavor.refresh_from_db()
    assert flavor.capacity == 2
    ImageRule.objects.create(prefix="docker.io/library/")
    team = Team.objects.create(slug="vision", name="Vision")
    alice = UserFactory(username="alice")
    Membership.objects.create(team=team, user=alice)
    admin = make_reviewer("admin")
    opens = (timezone.now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    window = actions.save_window(
        None,
        by=admin,
        capacity={flavor: 2},
        name="Now",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=(opens + timedelta(hours=2)).time(),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    return {"team": team, "alice": alice, "admin": admin, "window": window, "flavor": flavor}


def test_a_dra_job_runs_on_devices_the_scheduler_allocates(dra_setup, cluster, backend):
    job = submit(dra_setup, dra_setup["flavor"], gpus=1, parallelism=2, completions=2)
    actions.replan(reason="test")
    assert status_of(job) == Status.PLANNED
    name = manifests.job_name(job.pk)
    live = cluster.get("Job", name, "vision")
    assert live["spec"]["suspend"] is True
    template = cluster.get("ResourceClaimTemplate", name, "vision")
    assert template["metadata"]["ownerReferences"][0]["uid"] == live["metadata"]["uid"]

    assert batch_cluster.release_due() == [job.pk]
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    assert quota["spec"]["hard"][objects.QUOTA_KEY] == "2"  # the batch allotment, by class

    def allocated_pools():
        claims = cluster.list("ResourceClaim", namespace="vision")
        results = [
            r
            for c in claims
            for r in ((c.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        ]
        return sorted(r["pool"] for r in results) if len(results) == 2 else None

    # Both pods' claims, each allocated an H100 of cpu-0 by the real scheduler.
    assert wait_for(allocated_pools, timeout=90) == ["cpu-0", "cpu-0"]
    watch_until(job, {Status.RUNNING, Status.SUCCEEDED}, backend)
    watch_until(job, {Status.SUCCEEDED}, backend)
    job.refresh_from_db()
    assert job.used_gpu_seconds > 0


def test_cancelling_a_dra_job_deletes_its_template_with_it(dra_setup, cluster):
    job = submit(dra_setup, dra_setup["flavor"], gpus=1, parallelism=1, completions=1)
    actions.replan(reason="test")
    name = manifests.job_name(job.pk)
    assert cluster.get("ResourceClaimTemplate", name, "vision") is not None
    actions.cancel(job, by=dra_setup["alice"])
    assert cluster.get("Job", name, "vision") is None
    # The garbage collector follows the owner reference.
    wait_for(lambda: cluster.get("ResourceClaimTemplate", name, "vision") is None, timeout=60)


def test_a_dra_job_over_quota_stays_released_with_the_servers_refusal(dra_setup, cluster):
    """Over the quota a DRA pod is admitted and waits (the Job counts it active):
    the job stays released, as an extended-resource job whose pods the quota
    refuses does, with the claim controller's refusal among its events; once the
    quota allows the claim, it runs."""
    job = submit(dra_setup, dra_setup["flavor"], gpus=1, parallelism=1, completions=1)
    actions.replan(reason="test")
    # A second quota someone added by hand: the pod's claim cannot be made.
    cap = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "cap", "namespace": "vision"},
        "spec": {"hard": {objects.QUOTA_KEY: "0"}},
    }
    cluster.apply(cap, field_manager="someone")
    batch_cluster.release_due()
    name = manifests.job_name(job.pk)

    def refused():
        live = cluster.get("Job", name, "vision")
        if not (live.get("status") or {}).get("active"):
            return None  # the pod is not there yet
        batch_cluster.record(live, cluster=kube.cluster())  # as the portal's watch
        job.refresh_from_db()
        return [e for e in job.cluster_events if e["reason"] == "FailedResourceClaimCreation"]

    event = wait_for(refused, timeout=90)[-1]
    assert "exceeded quota: cap" in event["message"]
    assert objects.QUOTA_KEY in event["message"]
    assert status_of(job) == Status.RELEASED
    assert not job.events.filter(action="start").exists()

    cluster.delete("ResourceQuota", "cap", "vision")
    # The claim controller retries with back-off (about 30 s on v1.37.2).
    assert wait_for(lambda: _recorded(job, cluster, name) != Status.RELEASED, timeout=150)


def _recorded(job, cluster, name):
    batch_cluster.record(cluster.get("Job", name, "vision"), cluster=kube.cluster())
    return status_of(job)
