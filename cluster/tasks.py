from celery import shared_task

from cluster import actions, kube

MAX_RETRIES = 8


def sync_with_retries(task, action, *args):
    """Run a sync `action` in a bound task (bind=True, max_retries=MAX_RETRIES): a
    transient cluster error is retried with exponential backoff (at least the
    server's Retry-After), a permanent one never. The action records both first,
    on the team's or the job's page."""
    try:
        return action(*args)
    except kube.TransientClusterError as exc:
        backoff = min(2**task.request.retries, 60)
        raise task.retry(exc=exc, countdown=max(backoff, exc.retry_after or 0)) from None
    except kube.PermanentClusterError:
        return None  # retrying cannot help


@shared_task(name="cluster.record_inventory", acks_late=True)
def record_inventory():
    return actions.record_inventories()
