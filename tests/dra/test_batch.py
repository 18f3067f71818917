"""Batch jobs of a DRA flavor on the real control plane: planned suspended with
a ResourceClaimTemplate owned by the Job, released, the real scheduler allocates
each pod's claim from the published slices, the job succeeds; cancelling deletes
the Job and the garbage collector its template; an overrun stops at its deadline
and frees its devices; a spot reclaim is replaced in place (or, for a job that
does not tolerate it, requeued) on the devices of the node left."""

from datetime import timedelta

import pytest
from django.utils import timezone

from batch import actions, launch, manifests, watch
from batch.models import BatchJob, ImageRule
from cluster import actions as cluster_actions
from cluster import kube
from cluster.models import FlavorCapacity
from teams.models import Membership, Team
from tests.batch.test_cluster import record_as_the_portal, status_of, submit, watch_until
from tests.dra import objects
from tests.dra.test_cluster import REAL, dra_flavor, published  # noqa: F401 (fixture)
from tests.factories import UserFactory, make_reviewer
from tests.provisioning.conftest import eager  # noqa: F401 (fixture)
from tests.waiting import wait_for

Status = BatchJob.Status
pytestmark = REAL


@pytest.fixture
def spot_allowed():
    """Whether the window allows spot (a test parametrizes it to say otherwise)."""
    return False


@pytest.fixture
def dra_setup(transactional_db, backend, cluster, published, eager, spot_allowed):  # noqa: F811
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
        spot_allowed=spot_allowed,
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

    assert launch.release_due() == [job.pk]
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
    launch.release_due()
    name = manifests.job_name(job.pk)

    def refused():
        live = cluster.get("Job", name, "vision")
        if not (live.get("status") or {}).get("active"):
            return None  # the pod is not there yet
        watch.record(live, cluster=kube.cluster())  # as the portal's watch
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
    watch.record(cluster.get("Job", name, "vision"), cluster=kube.cluster())
    return status_of(job)


def test_a_dra_overrun_ends_deadline_exceeded_and_frees_its_devices(dra_setup, cluster, backend):
    """As an extended-resource job's (tests/batch/test_cluster.py): the Job controller
    stops it at `activeDeadlineSeconds`; its pod's claim goes with the pod, so the
    devices are free again and the allotment ends."""
    job = submit(
        dra_setup,
        dra_setup["flavor"],
        parallelism=1,
        completions=1,
        expected_runtime_minutes=1,
        max_runtime_minutes=1,
        annotations={"kubesim.io/duration": "3h"},
    )
    actions.replan()
    launch.release_due()
    job.refresh_from_db()
    assert job.deadline_seconds <= 60
    assert wait_for(lambda: allocated(cluster), timeout=90) == ["cpu-0"]
    # A minute of real time.
    watch_until(job, {Status.DEADLINE_EXCEEDED}, backend)
    job.refresh_from_db()
    assert "deadline" in job.events.last().reason.lower()
    assert job.finished_at <= job.closes_at
    wait_for(lambda: allocated(cluster) == [], timeout=60)
    wait_for(lambda: _quota(cluster) == "0", timeout=30)


# A pod that outlives the test's reclaim, and whose replacement still ends in it.
RUN = {"kubesim.io/duration": "40s"}
H100S_LEFT = "cpu-1-h100"  # the pool published on cpu-1 once cpu-0 is taken


def allocated(cluster):
    """The pools of the devices the namespace's claims hold, sorted."""
    return sorted(
        result["pool"]
        for claim in cluster.list("ResourceClaim", namespace="vision")
        for result in ((claim.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    )


def _quota(cluster):
    return cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"][objects.QUOTA_KEY]


def _reclaim_cpu0(job, cluster, backend):
    """Once the job's pod runs on an H100 of cpu-0 (the only ones yet), publish two
    more on cpu-1 (as the driver does, owned by the Node; the flavor's capacity in
    the catalog stays two) and reclaim cpu-0: its pods evicted (10 s grace), then
    the node deleted."""
    watch_until(job, {Status.RUNNING}, backend)
    assert wait_for(lambda: allocated(cluster), timeout=90) == ["cpu-0"]
    cluster.apply(
        objects.resource_slice(
            "cpu-1", objects.H100_DEVICES, pool=H100S_LEFT, owner=cluster.get("Node", "cpu-1")
        ),
        field_manager="tests",
    )
    backend.reclaim("cpu-0", grace_seconds=10)


def _h100s_once_cpu0_is_gone(cluster):
    """The inventory once the reclaimed node is deleted: (devices, nodes) of the
    flavor. Its slice, whether the garbage collector took it or not, counts no more."""
    wait_for(lambda: cluster.get("Node", "cpu-0") is None, timeout=60)
    cluster_actions.record_inventory()
    figures = FlavorCapacity.objects.get(flavor__slug="h100-dra")
    return figures.devices, figures.nodes


def _slice_of_cpu0(cluster):
    return cluster.get("ResourceSlice", "cpu-0-gpu.nvidia.com-1")


@pytest.mark.parametrize("spot_allowed", [True])
def test_a_spot_reclaim_of_a_dra_job_is_replaced_in_place_on_the_devices_left(
    dra_setup, cluster, backend
):
    # cpu-0's slice owned by its Node, as the driver publishes it.
    owner = cluster.get("Node", "cpu-0")
    cluster.apply(
        objects.resource_slice("cpu-0", objects.H100_DEVICES, owner=owner), field_manager="tests"
    )
    job = submit(
        dra_setup,
        dra_setup["flavor"],
        spot_allowed=True,
        parallelism=1,
        completions=1,
        annotations=RUN,
    )
    actions.replan()
    live = cluster.get("Job", manifests.job_name(job.pk), "vision")
    assert live["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Ignore"
    launch.release_due()
    _reclaim_cpu0(job, cluster, backend)

    def disrupted():
        record_as_the_portal(job, cluster)
        return BatchJob.objects.values_list("disrupted_pods", flat=True).get(pk=job.pk)

    assert len(wait_for(disrupted, timeout=60)) == 1
    assert status_of(job) == Status.RUNNING  # replaced in place, not requeued
    # The replacement pod's claim, made from the same template, is allocated an H100
    # of cpu-1; the evicted pod's claim went with it.
    assert wait_for(lambda: allocated(cluster) == [H100S_LEFT], timeout=90)
    watch_until(job, {Status.SUCCEEDED}, backend)
    job.refresh_from_db()
    assert [e.action for e in job.events.all()] == ["submit", "plan", "release", "start", "finish"]
    wait_for(lambda: allocated(cluster) == [], timeout=60)
    wait_for(lambda: _quota(cluster) == "0", timeout=30)
    assert _h100s_once_cpu0_is_gone(cluster) == (2, {"cpu-1": 2})
    wait_for(lambda: _slice_of_cpu0(cluster) is None, timeout=60)  # collected with its Node


def test_a_reclaim_of_a_dra_job_that_does_not_tolerate_it_requeues_and_runs_it_again(
    dra_setup, cluster, backend
):
    job = submit(dra_setup, dra_setup["flavor"], parallelism=1, completions=1, annotations=RUN)
    actions.replan()
    launch.release_due()
    name = manifests.job_name(job.pk)
    first_uid = cluster.get("Job", name, "vision")["metadata"]["uid"]
    _reclaim_cpu0(job, cluster, backend)

    def requeued():
        record_as_the_portal(job, cluster)
        return job.events.filter(action="requeue").exists()

    wait_for(requeued, timeout=60)
    assert job.events.get(action="finish").to_status == Status.PREEMPTED
    # Planned again into the window still open, released on a new Job whose template
    # is owned by it (not collected with the Job the requeue deleted).
    actions.replan()
    assert status_of(job) == Status.PLANNED
    assert launch.release_due() == [job.pk]
    live = cluster.get("Job", name, "vision")
    assert live["metadata"]["uid"] != first_uid
    template = wait_for(lambda: cluster.get("ResourceClaimTemplate", name, "vision"), timeout=30)
    assert template["metadata"]["ownerReferences"][0]["uid"] == live["metadata"]["uid"]
    assert wait_for(lambda: allocated(cluster) == [H100S_LEFT], timeout=90)
    watch_until(job, {Status.SUCCEEDED}, backend)
    job.refresh_from_db()
    actions_seen = [e.action for e in job.events.all()]
    assert actions_seen[:6] == ["submit", "plan", "release", "start", "finish", "requeue"]
    assert actions_seen[6:] == ["plan", "release", "start", "finish"]
    wait_for(lambda: allocated(cluster) == [], timeout=60)
    wait_for(lambda: _quota(cluster) == "0", timeout=30)
    # cpu-0's slice here has no owner: it outlives its node, and counts no more.
    assert _h100s_once_cpu0_is_gone(cluster) == (2, {"cpu-1": 2})
    assert _slice_of_cpu0(cluster) is not None
