"""Batch jobs on both cluster backends (kubesim and the real control plane with
KWOK nodes), over HTTP through the official client, tasks run inline: created
suspended at planning, released with a deadline, status by watch, FailedCreate
and log tail on the job, cancel deletes the Job, spot reclaims.

Runs are seconds long (`kubesim.io/duration`), so they end on a real cluster
while the test waits; on kubesim the test moves the clock as well."""

from datetime import timedelta

import pytest
import time_machine

from batch import actions, launch, manifests, watch
from batch.models import BatchJob
from cluster import kube
from tests.provisioning.conftest import wait_for

Status = BatchJob.Status


def submit(setup, flavor, **overrides):
    fields = {
        "name": "train",
        "image": "python:3.12-slim",
        "command": ["python", "-c", "print('hi')"],
        "args": [],
        "env": [],
        "gpus": 1,
        "parallelism": 2,
        "completions": 2,
        "expected_runtime_minutes": 30,
        "max_runtime_minutes": 60,
        "spot_allowed": False,
        "priority": 0,
        "annotations": {"kubesim.io/duration": "6s"},
    }
    return actions.submit(
        by=setup["alice"], team=setup["team"], flavor=flavor, **{**fields, **overrides}
    )


def status_of(job):
    return BatchJob.objects.values_list("status", flat=True).get(pk=job.pk)


# A pod that outlives any test: a reclaim then always finds it running. (With the
# 6 s default, kubesim's kubelet could finish it between the clock's move and the
# reclaim on a busy machine: a job that succeeded, never preempted.)
LONG = {"kubesim.io/duration": "1h"}


def reclaim_its_node(job, cluster, backend, *, ran_for=120):
    """Release `job`, let its one pod run (`ran_for` seconds of kubesim's clock;
    submit it with LONG), then reclaim its spot node (eviction, 30 s grace) and
    let 5 s pass."""
    launch.release_due()
    watch_until(job, {Status.RUNNING}, backend)
    (pod,) = wait_for(
        lambda: [p for p in cluster.list("Pod", namespace="vision") if p["spec"].get("nodeName")]
    )
    backend.pass_time(ran_for)
    backend.reclaim(pod["spec"]["nodeName"], grace_seconds=30)
    backend.pass_time(5)


def record_as_the_portal(job, cluster):
    """What the watch does with the live Job, done once here."""
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    if live is not None:
        watch.record(live, cluster=kube.cluster())


def watch_until(job, wanted, backend, *, advance_by=0):
    def reached():
        watch.watch_jobs(seconds=1)
        return status_of(job) in wanted

    return wait_for(
        reached, timeout=90, every=(lambda: backend.pass_time(advance_by)) if advance_by else None
    )


def test_planned_job_is_created_suspended_then_released_and_succeeds(
    setup,
    demo_flavors,
    cluster,
    backend,
):
    job = submit(setup, demo_flavors["h100"])
    actions.replan(reason="test")
    assert status_of(job) == Status.PLANNED
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["suspend"] is True
    labels = live["metadata"]["labels"]
    assert labels[manifests.JOB_LABEL] == str(job.pk)
    assert labels[manifests.TEAM_LABEL] == "vision"
    pod = live["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert cluster.list("Pod", namespace="vision") == []

    released = launch.release_due()
    assert released == [job.pk]
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["suspend"] is False
    assert 0 < live["spec"]["activeDeadlineSeconds"] <= 3600
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"  # the batch allotment

    watch_until(job, {Status.RUNNING}, backend)
    watch_until(job, {Status.SUCCEEDED}, backend, advance_by=5)
    job.refresh_from_db()
    assert job.finished_at is not None and job.used_gpu_seconds > 0
    assert job.log_tail
    assert [e.action for e in job.events.all()] == ["submit", "plan", "release", "start", "finish"]
    # The outcome is recorded: now the Job may be collected.
    wait_for(
        lambda: (
            (cluster.get("Job", f"batch-{job.pk}", "vision") or {})
            .get("spec", {})
            .get("ttlSecondsAfterFinished")
        )
    )
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_a_job_that_ends_early_moves_the_next_one_up(setup, demo_flavors, backend):
    # Both take the window's 8 H100 for up to 50 minutes: the second is planned
    # after the first's maximum runtime. The first ends after 6 seconds.
    both = {"gpus": 8, "parallelism": 1, "completions": 1, "max_runtime_minutes": 50}
    first = submit(setup, demo_flavors["h100"], **both)
    second = submit(setup, demo_flavors["h100"], name="second", **both)
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.planned_start >= first.planned_end
    assert launch.release_due() == [first.pk]

    # Recording the finish plans again (tasks run inline): the second moves up
    # to the moment the first ended, and the next release takes it.
    watch_until(first, {Status.SUCCEEDED}, backend, advance_by=5)
    first.refresh_from_db()
    moved = BatchJob.objects.get(pk=second.pk)
    assert first.finished_at <= moved.planned_start < second.planned_start
    assert moved.events.last().action == "replan"
    assert launch.release_due() == [second.pk]


def test_an_overrun_ends_deadline_exceeded_at_the_close(setup, demo_flavors, cluster, backend):
    job = submit(
        setup,
        demo_flavors["h100"],
        annotations={"kubesim.io/duration": "3h"},
        expected_runtime_minutes=1,
        max_runtime_minutes=1,
    )
    actions.replan()
    launch.release_due()
    job.refresh_from_db()
    assert job.deadline_seconds <= 60
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["activeDeadlineSeconds"] == job.deadline_seconds
    # The job controller ends it (a minute of real time on the real cluster).
    watch_until(job, {Status.DEADLINE_EXCEEDED}, backend, advance_by=15)
    job.refresh_from_db()
    assert "deadline" in job.events.last().reason.lower()


def test_a_failed_create_is_shown_on_the_job(setup, demo_flavors, cluster, backend):
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    # A second quota someone added by hand: the job's pods are refused at creation.
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "cap", "namespace": "vision"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "0"}},
        },
        field_manager="someone",
    )
    launch.release_due()

    def shown():
        watch.record(
            cluster.get("Job", f"batch-{job.pk}", "vision"), cluster=kube.cluster()
        )  # as the portal
        events = BatchJob.objects.values_list("cluster_events", flat=True).get(pk=job.pk)
        return [e for e in events if e["reason"] == "FailedCreate"]

    # The real Job controller tries again after a back-off: each refusal is an event
    # of its own (its pod's name differs), so there may be more than one.
    events = wait_for(shown)
    assert all("exceeded quota: cap" in event["message"] for event in events), events
    assert status_of(job) == Status.RELEASED


def test_cancel_deletes_the_job(setup, demo_flavors, cluster):
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    assert cluster.get("Job", f"batch-{job.pk}", "vision") is not None
    actions.cancel(job, by=setup["alice"])
    assert cluster.get("Job", f"batch-{job.pk}", "vision") is None


@pytest.mark.kubesim_only("the pod runs five minutes before its node goes: kubesim's clock")
def test_a_spot_reclaim_is_replaced_in_place_and_lost_minutes_recorded(
    setup,
    demo_flavors,
    cluster,
    backend,
):
    job = submit(
        setup,
        demo_flavors["l4"],
        spot_allowed=True,
        parallelism=1,
        completions=1,
        annotations={"kubesim.io/duration": "20m"},
    )
    actions.replan()
    live = cluster.get("Job", f"batch-{job.pk}", "vision")
    assert live["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Ignore"
    launch.release_due()
    watch_until(job, {Status.RUNNING}, backend)
    (pod,) = wait_for(
        lambda: [p for p in cluster.list("Pod", namespace="vision") if p["spec"].get("nodeName")]
    )
    backend.pass_time(300)
    backend.reclaim(pod["spec"]["nodeName"], grace_seconds=30)
    backend.pass_time(5)  # within the grace: the evicted pod is still there, terminating

    def lost():
        watch.record(
            cluster.get("Job", f"batch-{job.pk}", "vision"), cluster=kube.cluster()
        )  # as the portal
        return BatchJob.objects.values_list("lost_gpu_minutes", flat=True).get(pk=job.pk)

    assert wait_for(lost) >= 5
    assert status_of(job) == Status.RUNNING
    watch_until(job, {Status.SUCCEEDED}, backend, advance_by=300)


def test_a_reclaim_of_a_job_that_does_not_tolerate_it_sends_it_back_to_the_queue(
    setup, demo_flavors, cluster, backend
):
    job = submit(setup, demo_flavors["h100"], parallelism=1, completions=1, annotations=LONG)
    actions.replan()
    reclaim_its_node(job, cluster, backend)

    def requeued():
        record_as_the_portal(job, cluster)
        return job.events.filter(action="requeue").exists()

    wait_for(requeued)
    job.refresh_from_db()
    actions_seen = [e.action for e in job.events.all()]
    assert actions_seen[:6] == ["submit", "plan", "release", "start", "finish", "requeue"]
    assert job.events.get(action="finish").to_status == Status.PREEMPTED
    # Back in the queue, and planned again at once into the window still open.
    assert job.status in (Status.QUEUED, Status.PLANNED)


def test_a_burst_is_synced_with_three_queries_however_many_jobs(
    setup, demo_flavors, cluster, django_assert_num_queries
):
    jobs = [
        submit(setup, demo_flavors["l4"], name=f"shard-{n}", parallelism=1, completions=1)
        for n in range(6)
    ]
    actions.replan()
    ids = [job.pk for job in jobs]
    assert {status_of(job) for job in jobs} == {Status.PLANNED}
    launch.job_sync.mark_many(ids)  # wanted again, not yet queued

    # One claim, one read, one finish (every row has the same generation).
    with django_assert_num_queries(3):
        results = launch.sync_jobs(ids)
    assert results == dict.fromkeys(ids, "applied")
    assert launch.sync_jobs(ids) == {}  # nothing left to do
    assert all(cluster.get("Job", f"batch-{pk}", "vision")["spec"]["suspend"] for pk in ids)


def test_cancelling_a_running_job_deletes_it_and_charges_the_time_so_far(
    setup, demo_flavors, cluster, backend, client
):
    job = submit(setup, demo_flavors["h100"], annotations={"kubesim.io/duration": "2h"})
    actions.replan()
    launch.release_due()
    watch_until(job, {Status.RUNNING}, backend)
    wait_for(lambda: cluster.list("Pod", namespace="vision"))
    job.refresh_from_db()
    client.force_login(setup["alice"])
    # Twenty minutes into the run (2 pods x 1 GPU), on the portal's clock.
    with time_machine.travel(job.started_at + timedelta(minutes=20), tick=False):
        running = client.get(f"/batch/jobs/{job.pk}/").content.decode()
        listed = client.get("/batch/jobs/").content.decode()
        confirm = client.get(f"/batch/jobs/{job.pk}/cancel/").content.decode()
        response = client.post(f"/batch/jobs/{job.pk}/cancel/", follow=True)
    actual = running.split('id="actual">')[1].split("</dd>")[0]
    # 2/3 GPU-hour at 2.00 x the window's 0.5; the estimate was for 30 min: 1.00.
    assert "0.67 USD" in actual and "20 min so far" in actual
    assert "Stop and cancel job…" in running
    # Asked first: what goes, and what it costs so far.
    assert f"Its Job vision/batch-{job.pk} is deleted from the cluster" in confirm
    assert "charged: 0.67 GPU-hours, 0.67 USD by now" in confirm
    assert "Stop and cancel job</button>" in confirm
    assert "1.00 USD" in listed and "0.67 USD" in listed and "20 min so far" in listed
    assert b"the GPU-time it held so far is charged" in response.content

    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert job.used_gpu_seconds == 20 * 60 * 2
    assert cluster.get("Job", f"batch-{job.pk}", "vision") is None
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"  # the allotment ended
    done = response.content.decode().split('id="actual">')[1].split("</dd>")[0]
    assert "0.67 USD" in done and "20 min," in done and "so far" not in done
