"""Thin Celery tasks: plain arguments in, an idempotent action called, nothing stored."""

from celery import shared_task

from batch import actions
from batch import cluster as batch_cluster
from cluster import kube

MAX_RETRIES = 8


@shared_task(name="batch.plan", acks_late=True)
def plan(reason=""):
    actions.replan(reason=reason)


@shared_task(name="batch.tick", acks_late=True)
def tick():
    return actions.tick()


@shared_task(name="batch.sync_job", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def sync_job(self, job_id):
    try:
        return batch_cluster.sync_job(job_id)
    except kube.TransientClusterError as exc:
        backoff = min(2**self.request.retries, 60)
        raise self.retry(exc=exc, countdown=max(backoff, exc.retry_after or 0)) from None
    except kube.PermanentClusterError:
        return None  # shown on the job's page; retrying cannot help


@shared_task(name="batch.sync_jobs", acks_late=True)
def sync_jobs(job_ids):
    """Several jobs' syncs in a row; one that fails is retried on its own."""
    for job_id in job_ids:
        try:
            batch_cluster.sync_job(job_id)
        except kube.TransientClusterError:
            sync_job.apply_async((job_id,), countdown=1)
        except kube.PermanentClusterError:
            pass  # shown on the job's page


@shared_task(name="batch.watch", acks_late=True)
def watch():
    try:
        return batch_cluster.watch_jobs()
    except kube.ClusterError:
        return None  # the next run lists again from where it was
