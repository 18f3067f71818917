"""Thin Celery tasks: ids in, an idempotent action called, nothing stored.

Sync tasks retry transient cluster errors with exponential backoff (at least
the server's Retry-After) and never retry permanent ones; both are recorded on
the team by the action before they get here.
"""

from celery import shared_task

from cluster import kube
from cluster.tasks import MAX_RETRIES, sync_with_retries
from provisioning import actions


@shared_task(name="provisioning.sync_team", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def sync_team(self, team_id):
    return sync_with_retries(self, actions.sync_team, team_id)


@shared_task(name="provisioning.sync_teams", acks_late=True)
def sync_teams(team_ids):
    """A batch of teams' syncs in one go; a team that failed for a while, or was
    changed meanwhile, is queued on its own (a permanent error is shown on it)."""
    for team_id, result in actions.sync_teams(team_ids).items():
        if isinstance(result, kube.TransientClusterError):
            sync_team.apply_async((team_id,), countdown=1)
        elif result is None:
            sync_team.apply_async((team_id,))


@shared_task(name="provisioning.sweep", acks_late=True)
def sweep():
    return len(actions.sweep())


@shared_task(name="provisioning.check_drift", acks_late=True)
def check_drift():
    return len(actions.check_drift())
