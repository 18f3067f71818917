"""Thin Celery tasks: ids in, an idempotent action called, nothing stored.

Sync tasks retry transient cluster errors with exponential backoff (at least
the server's Retry-After) and never retry permanent ones; both are recorded on
the team by the action before they get here.
"""

from celery import shared_task

from cluster import kube
from provisioning import actions

MAX_RETRIES = 8


@shared_task(name="provisioning.sync_team", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def sync_team(self, team_id):
    try:
        return actions.sync_team(team_id)
    except kube.TransientClusterError as exc:
        backoff = min(2**self.request.retries, 60)
        raise self.retry(exc=exc, countdown=max(backoff, exc.retry_after or 0)) from None
    except kube.PermanentClusterError:
        return None  # shown on the team's page; retrying cannot help


@shared_task(name="provisioning.sweep", acks_late=True)
def sweep():
    return len(actions.sweep())


@shared_task(name="provisioning.check_drift", acks_late=True)
def check_drift():
    return len(actions.check_drift())
