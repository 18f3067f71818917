"""Thin Celery tasks: plain arguments in, an idempotent action called, nothing stored."""

from celery import shared_task

from batch import actions, launch
from batch.watch import watch_jobs
from cluster import kube
from cluster.tasks import MAX_RETRIES, sync_with_retries


@shared_task(name="batch.plan", acks_late=True)
def plan(reason=""):
    actions.replan(reason=reason)


@shared_task(name="batch.tick", acks_late=True)
def tick():
    return actions.tick()


@shared_task(name="batch.sync_job", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def sync_job(self, job_id):
    return sync_with_retries(self, launch.sync_job, job_id)


@shared_task(name="batch.sync_jobs", acks_late=True)
def sync_jobs(job_ids):
    """Several jobs' syncs in a row; one that fails is retried on its own."""
    for job_id, result in launch.sync_jobs(job_ids).items():
        if isinstance(result, kube.TransientClusterError):
            sync_job.apply_async((job_id,), countdown=1)
        # a permanent error is shown on the job's page


@shared_task(name="batch.watch", acks_late=True)
def watch():
    try:
        return watch_jobs()
    except kube.ClusterError:
        return None  # the next run lists again from where it was
