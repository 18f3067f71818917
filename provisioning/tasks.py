"""Thin Celery tasks: ids in, an idempotent action called, nothing stored.

Sync tasks retry transient cluster errors with exponential backoff (at least
the server's Retry-After) and never retry permanent ones; both are recorded on
the team by the action before they get here.
"""

from celery import shared_task

from cluster.tasks import MAX_RETRIES, sync_with_retries
from provisioning import actions


@shared_task(name="provisioning.sync_team", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def sync_team(self, team_id):
    return sync_with_retries(self, actions.sync_team, team_id)


@shared_task(name="provisioning.sweep", acks_late=True)
def sweep():
    return len(actions.sweep())


@shared_task(name="provisioning.check_drift", acks_late=True)
def check_drift():
    return len(actions.check_drift())
