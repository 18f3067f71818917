"""A job's run with real Celery worker and beat processes, kubesim over HTTP and
its sim clock: the beat releases the Job and its watch records the outcome, so
nothing here calls the portal's cluster code inline. An overrun ends
`deadline_exceeded` at its deadline (never past the close); a spot reclaim is
replaced in place with the lost GPU-minutes recorded; a reclaim of a job that does
not tolerate it puts it back in the queue, and it runs again in the same window."""

import pytest

from batch.models import BatchJob
from tests.batch.conftest import FAST
from tests.batch.test_cluster import status_of, submit
from tests.provisioning.conftest import wait_for

pytestmark = [
    pytest.mark.celery,
    # Runs of minutes to hours: on kubesim's clock at once, on a real one as long. Their
    # real-cluster counterparts (deadline, reclaims) are in test_cluster.py.
    pytest.mark.kubesim_only("its runs last minutes to hours of kubesim's clock"),
]
Status = BatchJob.Status


@pytest.fixture
def running_pool(open_now, workers, beat):
    workers.start("w1", **FAST)
    return open_now


def advance(backend, seconds):
    return lambda: backend.pass_time(seconds)


def reached(job, *wanted):
    return lambda: status_of(job) in wanted


def scheduled_pod(cluster, job):
    pods = cluster.list("Pod", namespace="vision", label_selector=f"job-name=batch-{job.pk}")
    return [
        p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


def gpu_quota(cluster):
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    return quota and quota["spec"]["hard"].get("requests.nvidia.com/gpu")


def test_an_overrun_ends_deadline_exceeded_by_the_close(
    running_pool, demo_flavors, cluster, backend
):
    window = running_pool["window"]
    job = submit(
        running_pool,
        demo_flavors["h100"],
        parallelism=1,
        completions=1,
        max_runtime_minutes=60,
        annotations={"kubesim.io/duration": "3h"},
    )
    wait_for(reached(job, Status.RUNNING), timeout=60, interval=0.3)
    job.refresh_from_db()
    seconds_to_close = (job.closes_at - job.released_at).total_seconds()
    assert job.deadline_seconds == min(60 * 60, int(seconds_to_close))
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["activeDeadlineSeconds"] == job.deadline_seconds
    assert gpu_quota(cluster) == "1"  # the batch allotment while it runs
    assert job.window_id == window.pk

    # Sim time runs past the deadline: the Job controller fails the Job, the watch
    # (in the worker, queued by the beat) records it.
    wait_for(
        reached(job, Status.DEADLINE_EXCEEDED),
        timeout=60,
        interval=0.3,
        every=advance(backend, 600),
    )
    job.refresh_from_db()
    assert "deadline" in job.events.last().reason.lower()
    assert job.used_gpu_seconds > 0
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    failed = [c for c in live["status"]["conditions"] if c["type"] == "Failed"]
    assert failed[0]["reason"] == "DeadlineExceeded"
    wait_for(lambda: gpu_quota(cluster) == "0", timeout=30)
    wait_for(
        lambda: (
            (cluster.get("Job", f"batch-{job.pk}", "vision") or {})
            .get("spec", {})
            .get("ttlSecondsAfterFinished")
        ),
        timeout=30,
    )


def test_a_spot_reclaim_during_the_run_is_replaced_in_place(
    running_pool, demo_flavors, cluster, backend
):
    job = submit(
        running_pool,
        demo_flavors["l4"],
        spot_allowed=True,
        parallelism=1,
        completions=1,
        annotations={"kubesim.io/duration": "20m"},
    )
    wait_for(reached(job, Status.RUNNING), timeout=60, interval=0.3)
    (pod,) = wait_for(lambda: scheduled_pod(cluster, job), timeout=30)
    advance(backend, 300)()
    backend.reclaim(pod["spec"]["nodeName"])
    advance(backend, 5)()  # within the grace: the evicted pod is still there, terminating

    lost = wait_for(
        lambda: BatchJob.objects.values_list("lost_gpu_minutes", flat=True).get(pk=job.pk),
        timeout=30,
        interval=0.3,
    )
    assert lost >= 5
    assert status_of(job) == Status.RUNNING  # replaced in place, not requeued
    wait_for(reached(job, Status.SUCCEEDED), timeout=60, interval=0.3, every=advance(backend, 300))
    job.refresh_from_db()
    assert [e.action for e in job.events.all()] == ["submit", "plan", "release", "start", "finish"]
    assert job.lost_gpu_minutes == lost  # once per pod


def test_a_reclaim_of_a_job_that_does_not_tolerate_it_requeues_and_runs_it_again(
    running_pool, demo_flavors, cluster, backend
):
    job = submit(
        running_pool,
        demo_flavors["h100"],
        parallelism=1,
        completions=1,
        annotations={"kubesim.io/duration": "5m"},
    )
    wait_for(reached(job, Status.RUNNING), timeout=60, interval=0.3)
    (pod,) = wait_for(lambda: scheduled_pod(cluster, job), timeout=30)
    advance(backend, 120)()
    backend.reclaim(pod["spec"]["nodeName"])
    advance(backend, 5)()

    wait_for(lambda: job.events.filter(action="requeue").exists(), timeout=30, interval=0.3)
    # Planned again into the window still open, released again, and it completes.
    wait_for(reached(job, Status.SUCCEEDED), timeout=90, interval=0.3, every=advance(backend, 120))
    job.refresh_from_db()
    actions_seen = [e.action for e in job.events.all()]
    assert actions_seen[:6] == ["submit", "plan", "release", "start", "finish", "requeue"]
    assert actions_seen[6:] == ["plan", "release", "start", "finish"]
    assert job.events.get(action="finish", to_status=Status.PREEMPTED)
    assert job.lost_gpu_minutes >= 2
