"""The release at a window's opening with real Celery worker processes, real Redis
and kubesim over HTTP: every Job of the window is released exactly once when a
worker is SIGKILLed mid-release, when the broker is down as the window opens
(the beat's tick sweeps what was never queued), and when a third of the API's
answers to the release are transient errors (kubesim's fault injection).

"Exactly once" is read on both sides: the portal records one release per job,
and each Job's spec changed once (kubesim bumps `metadata.generation` on every
spec change, as the API server does), from suspended to unsuspended with the
deadline fixed at release; re-applies of the Jobs a dead worker had applied
but not yet recorded change nothing.
"""

import os
from collections import Counter
from datetime import timedelta
from decimal import Decimal

import pytest
import redis
from django.db.models import F
from django.utils import timezone

from batch import actions, launch
from batch.models import BatchJob, BatchJobEvent, ImageRule, JobSync
from cluster.models import Flavor
from teams.models import Membership, Team
from tests.factories import UserFactory, make_reviewer
from tests.provisioning.conftest import _use_broker, wait_for

pytestmark = pytest.mark.celery

JOBS = 60
DEAD_BROKER = "redis://127.0.0.1:9/0"  # nothing listens there


def all_synced():
    return not JobSync.objects.filter(generation__gt=F("synced_generation")).exists()


def no_message_in_flight(redis_url):
    """Nothing queued, nothing a worker has taken and not yet acknowledged."""
    client = redis.Redis.from_url(redis_url)
    prefix = os.environ["CELERY_BROKER_KEY_PREFIX"]  # this test's (redis_url)
    return client.llen(f"{prefix}celery") == 0 and client.hlen(f"{prefix}unacked") == 0


def live_jobs(cluster):
    return {obj["metadata"]["name"]: obj for obj in cluster.list("Job", namespace=None)}


@pytest.fixture
def planned(workers, redis_url, backend, cluster, demo_flavors):
    """JOBS one-GPU jobs of three teams, planned at the opening of a window open now,
    their Jobs created suspended by a worker; returns (jobs, generation by Job name)."""
    from portal.celery import app

    # A flavor as wide as the burst, on the H100 nodes (the pods need not all run).
    flavor = Flavor.objects.create(
        slug="burst",
        name="Burst",
        gpu_model="NVIDIA-H100-80GB-HBM3",
        memory_gb=80,
        resource_name="nvidia.com/gpu",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        capacity=JOBS,
        price_per_gpu_hour=Decimal("2.0000"),
    )
    ImageRule.objects.create(prefix="docker.io/library/")
    admin = make_reviewer("admin")
    opens = (timezone.now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    actions.save_window(
        None,
        by=admin,
        capacity={flavor: JOBS},
        name="Now",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=(opens + timedelta(hours=2)).time(),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    members = []
    for slug in ("vision", "nlp", "speech"):
        team = Team.objects.create(slug=slug, name=slug.title())
        user = UserFactory(username=f"{slug}-member")
        Membership.objects.create(team=team, user=user)
        members.append((team, user))
    # Submitted with the broker away, so sixty planner runs are not queued: the test
    # plans once below (the submissions themselves do not need the broker).
    _use_broker(app, DEAD_BROKER)
    try:
        for n in range(JOBS):
            team, user = members[n % len(members)]
            actions.submit(
                by=user,
                team=team,
                flavor=flavor,
                name=f"job-{n}",
                image="python:3.12-slim",
                command=["python", "-c", "print('hi')"],
                args=[],
                env=[],
                gpus=1,
                parallelism=1,
                completions=1,
                expected_runtime_minutes=30,
                max_runtime_minutes=60,
                spot_allowed=False,
                priority=0,
                annotations={"kubesim.io/duration": "30m"},
            )
    finally:
        _use_broker(app, redis_url)
    actions.replan(reason="test")
    jobs = list(BatchJob.objects.order_by("pk"))
    assert {job.status for job in jobs} == {BatchJob.Status.PLANNED}

    workers.start("w1")

    def created():
        found = live_jobs(cluster)
        return all_synced() and len(found) == JOBS and found

    # The outbox's sweep, not the tick: the tick would release them already.
    found = wait_for(created, timeout=60, interval=0.3, every=launch.job_sync.sweep)
    assert all(obj["spec"]["suspend"] is True for obj in found.values())
    # A sync the sweep sent twice (a slow worker) must not carry the release below.
    wait_for(lambda: no_message_in_flight(redis_url), timeout=30, interval=0.3)
    generations = {name: obj["metadata"]["generation"] for name, obj in found.items()}
    backend.clear_requests()
    return jobs, generations


def assert_released_exactly_once(jobs, generations, cluster, backend):
    found = live_jobs(cluster)
    assert sorted(found) == sorted(job.kubernetes_name for job in jobs)  # 0 missed
    unsuspended = [name for name, obj in found.items() if obj["spec"]["suspend"] is False]
    assert len(unsuspended) == JOBS
    # One spec change per Job (suspended -> released): 0 duplicates on the cluster.
    bumps = {name: obj["metadata"]["generation"] - generations[name] for name, obj in found.items()}
    assert set(bumps.values()) == {1}, bumps
    deadlines = {
        job.kubernetes_name: job.deadline_seconds
        for job in BatchJob.objects.filter(pk__in=[job.pk for job in jobs])
    }
    assert all(
        found[name]["spec"]["activeDeadlineSeconds"] == deadline
        for name, deadline in deadlines.items()
    )
    # ... and one release per job in the portal.
    releases = Counter(
        BatchJobEvent.objects.filter(action="release").values_list("job_id", flat=True)
    )
    assert releases == Counter({job.pk: 1 for job in jobs})
    assert all_synced()
    patches = Counter(
        r["path"] for r in backend.requests() if r["method"] == "PATCH" and "/jobs/" in r["path"]
    )
    return patches


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_a_worker_killed_mid_release_every_job_released_exactly_once(
    planned, workers, backend, cluster
):
    jobs, generations = planned
    (first,) = workers.processes
    # Every API call takes 0.25 s: the release is still going when the worker dies.
    backend.faults(latency_ms=250)
    released = launch.release_due()
    assert sorted(released) == [job.pk for job in jobs]

    def some_patched():
        return (
            sum(1 for r in backend.requests() if r["method"] == "PATCH" and "/jobs/" in r["path"])
            >= 5
        )

    wait_for(some_patched, timeout=30)
    workers.kill(first)
    unsuspended = sum(1 for obj in live_jobs(cluster).values() if obj["spec"]["suspend"] is False)
    assert 0 < unsuspended < JOBS, "the worker died mid-release"
    backend.clear_faults()

    workers.start("w2")
    workers.start("w3")
    # The dead worker's lease runs out (3 s); the beat's tick sweeps the rest.
    wait_for(all_synced, timeout=60, interval=0.3, every=actions.tick)

    patches = assert_released_exactly_once(jobs, generations, cluster, backend)
    assert len(patches) == JOBS
    # Jobs applied again were those of the message the dead worker was carrying (it
    # records a message's jobs as done after their applies) and, on a busy machine,
    # a few a tick swept while their message was still queued; most were applied
    # once, and every second apply changed nothing (one generation each, above).
    repeated = sum(count - 1 for count in patches.values())
    assert repeated < JOBS, patches


def test_the_broker_down_at_the_opening_the_tick_releases_every_job_once(
    planned, workers, redis_url, backend, cluster
):
    from portal.celery import app

    jobs, generations = planned
    _use_broker(app, DEAD_BROKER)
    try:
        released = launch.release_due()
    finally:
        _use_broker(app, redis_url)
    # The release stands in the database; nothing reached the cluster.
    assert sorted(released) == [job.pk for job in jobs]
    assert set(BatchJob.objects.values_list("status", flat=True)) == {BatchJob.Status.RELEASED}
    assert not all_synced()
    assert backend.writes() == []

    # The broker is back: the beat's tick sweeps the unqueued syncs.
    wait_for(all_synced, timeout=60, interval=0.3, every=actions.tick)

    patches = assert_released_exactly_once(jobs, generations, cluster, backend)
    assert patches == Counter({path: 1 for path in patches}) and len(patches) == JOBS


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_transient_api_errors_during_the_release_every_job_released_exactly_once(
    planned, workers, backend, cluster
):
    jobs, generations = planned
    workers.start("w2")
    # A third of the Job PATCHes answer 500, 503 (Retry-After) or 429 throughout:
    # the client retries in place, then the task retries with backoff.
    backend.faults(error_rate=0.35, paths=r"/jobs/", methods=["PATCH"], retry_after=1)
    released = launch.release_due()
    assert sorted(released) == [job.pk for job in jobs]

    wait_for(all_synced, timeout=90, interval=0.3, every=actions.tick)
    answers = Counter(
        r["status"] for r in backend.requests() if r["method"] == "PATCH" and "/jobs/" in r["path"]
    )
    backend.clear_faults()

    errors = sum(count for status, count in answers.items() if status >= 500 or status == 429)
    assert errors > 0, answers  # the faults were met, and retried
    assert answers[200] >= JOBS
    # A retry still queued when the last Job synced may PATCH once more: the same
    # spec, which bumps no generation (checked here).
    assert_released_exactly_once(jobs, generations, cluster, backend)
