"""A batch job idle past its grace (idle policy in act mode) is taken off the
cluster and queued again, the reason in its history, its submitter told; on
both cluster backends. The observations are what the evaluation's two PromQL
queries return (tests/idle/test_evaluate.py reads them from a real Prometheus)."""

from datetime import timedelta

from batch import actions as batch_actions
from batch import launch
from batch.models import BatchJob, BatchJobEvent
from cluster import clock
from cluster.models import Flavor
from idle import actions
from idle.evaluation import Workload
from idle.models import IdleAction
from tests.batch.test_cluster import status_of, submit, watch_until
from tests.provisioning.conftest import wait_for

Status = BatchJob.Status


def test_an_idle_batch_job_is_suspended_and_requeued(
    setup, demo_flavors, cluster, backend, mailoutbox
):
    h100 = demo_flavors["h100"]
    job = submit(setup, h100, annotations={"kubesim.io/duration": "2h"})
    batch_actions.replan()
    launch.release_due()
    watch_until(job, {Status.RUNNING}, backend)
    wait_for(lambda: cluster.list("Pod", namespace="vision"))
    actions.set_policy(h100, None, by=setup["admin"], idle_minutes=10, grace_minutes=5, mode="act")
    name = f"batch-{job.pk}"
    idle = Workload("vision", "Job", name, h100.pk, gpus=2, activity=0.01, pods=2)
    start = job.started_at if job.started_at else clock.now()
    flavors = list(Flavor.objects.all())
    for minute in range(1, 17):
        actions.apply_observations({idle.key: idle}, flavors, start + timedelta(minutes=minute))
    # Back in the queue, and planned again by the planner run it asked for.
    assert status_of(job) in (Status.QUEUED, Status.PLANNED)
    event = BatchJobEvent.objects.get(job=job, action="idle_requeue")
    assert (event.from_status, event.to_status) == (Status.RUNNING, Status.QUEUED)
    assert "past its grace: requeued" in event.reason
    (mail,) = [m for m in mailoutbox if "back in the queue" in m.subject]
    assert mail.to == [setup["alice"].email]
    assert list(IdleAction.objects.filter(workload_name=name).values_list("kind", flat=True)) == [
        "suspended",
        "announced",
    ]

    def suspended_or_gone():
        live = cluster.get("Job", name, "vision")
        return live is None or live["spec"].get("suspend") is True

    # Its pods go: the Job deleted, or made anew suspended by the planning.
    wait_for(suspended_or_gone, timeout=60)
    backend.pass_time(60)  # kubesim: the pods' termination grace, on its clock
    wait_for(lambda: not cluster.list("Pod", namespace="vision", label_selector=f"job-name={name}"))
