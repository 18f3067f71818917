"""The one front door of a batch job's status.

Every transition (and the release past a budget, which keeps the status) is a
compare-and-set: an UPDATE whose WHERE carries the statuses the job may move
from, so of two writers racing (a cancel and the watch, two planner runs) one
moves the job and the other finds it moved. Each move writes one row of the
job's history (`BatchJobEvent`). People and the
planner (`batch.actions`), the release (`batch.launch`), the watch and idle's
requeue (`batch.watch`) move jobs only through here.
"""

from django.utils import timezone

from batch.models import BatchJob, BatchJobEvent
from teams.errors import IllegalTransition

Status = BatchJob.Status
Action = BatchJobEvent.Action


def record(job, *, action, from_status, to_status, actor=None, reason=""):
    """One row of the job's history; also for an action that keeps its status."""
    return BatchJobEvent.objects.create(
        job=job,
        actor=actor,
        action=action,
        from_status=from_status,
        to_status=to_status,
        reason=reason,
    )


def _moved_from(job, allowed_from):
    # The status the UPDATE moved it from: the one the caller read, when that was
    # allowed (callers pass what they read); else the first allowed.
    return job.status if job.status in allowed_from else allowed_from[0]


def move(job, *, to, allowed_from, action, actor=None, reason="", **fields):
    """Set the job's status to `to` (and `fields`) if it is one of `allowed_from`:
    one UPDATE, and one INSERT of its history if it moved. True if it moved (the
    instance too); False, with nothing written, if its status was another."""
    moved = BatchJob.objects.filter(pk=job.pk, status__in=allowed_from).update(
        status=to, updated_at=timezone.now(), **fields
    )
    if not moved:
        return False
    from_status = _moved_from(job, allowed_from)
    for name, value in fields.items():
        setattr(job, name, value)
    job.status = to
    record(job, action=action, from_status=from_status, to_status=to, actor=actor, reason=reason)
    return True


def move_or_refuse(job, *, to, allowed_from, action, **kwargs):
    """`move`, or IllegalTransition saying which status the job is in (a query more)."""
    if move(job, to=to, allowed_from=allowed_from, action=action, **kwargs):
        return job
    current = BatchJob.objects.values_list("status", flat=True).get(pk=job.pk)
    allowed = " or ".join(Status(s).label.lower() for s in allowed_from)
    raise IllegalTransition(
        f"Batch job #{job.pk} is {Status(current).label.lower()}: only {allowed} jobs "
        f"allow {action}."
    )


def release_past_budget(job, *, actor, reason):
    """Let a queued or planned job run past its team's hard budget, keeping its status:
    the same compare-and-set (and not released already), one row of history."""
    released = BatchJob.objects.filter(
        pk=job.pk, status__in=BatchJob.PLANNABLE, budget_override=False
    ).update(budget_override=True)
    if not released:
        raise IllegalTransition("Only a queued or planned job not released already can be.")
    job.refresh_from_db(fields=["status", "budget_override"])
    status = job.status
    record(
        job,
        action=Action.BUDGET_RELEASE,
        from_status=status,
        to_status=status,
        actor=actor,
        reason=reason,
    )
    return job


def move_many(jobs, *, to, allowed_from, action, reason, **fields):
    """`move` for a burst of jobs sharing `fields` and `reason`: one UPDATE and one
    INSERT of their history, however many. The caller holds their row locks
    (select_for_update), so each is in one of `allowed_from` and moves; an UPDATE
    that moves fewer raises IllegalTransition (the caller's transaction rolls back)."""
    jobs = list(jobs)
    moved = BatchJob.objects.filter(
        pk__in=[job.pk for job in jobs], status__in=allowed_from
    ).update(status=to, updated_at=timezone.now(), **fields)
    if moved != len(jobs):
        raise IllegalTransition(f"{len(jobs) - moved} of {len(jobs)} batch jobs moved meanwhile.")
    events = []
    for job in jobs:
        events.append(
            BatchJobEvent(
                job=job,
                action=action,
                from_status=_moved_from(job, allowed_from),
                to_status=to,
                reason=reason,
            )
        )
        for name, value in fields.items():
            setattr(job, name, value)
        job.status = to
    BatchJobEvent.objects.bulk_create(events)
    return jobs
