"""Batch jobs' Jobs on the cluster: each job's Job made to match its status
(through the outbox), and planned jobs released at their planned start.

- planned: the Job exists, suspended, so bad specs and quota errors show early;
- released / running: unsuspended with activeDeadlineSeconds fixed at release;
- finished: `ttlSecondsAfterFinished` set, now that the outcome is recorded;
- queued again, cancelled, preempted: the Job deleted with propagationPolicy Background.

What the cluster says back (the watch) is `batch.watch`.
"""

from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum

from batch import emails, jobs, manifests
from batch.models import BatchJob, JobSync, PlannerState
from cluster import clock, kube
from cluster.outbox import Outbox
from teams import hooks
from teams.formats import money
from teams.namespaces import namespace_of

Status = BatchJob.Status
Action = jobs.Action

# Jobs synced per message: a window's opening releases thousands at once, and one
# message each would cost more to publish than the API calls they carry.
CHUNK = 25

job_sync = Outbox(
    JobSync,
    key="job_id",
    task="batch.tasks.sync_job",
    lease=lambda: settings.PORTAL_SYNC_LEASE,
    batch_task="batch.tasks.sync_jobs",
    batch_size=lambda: CHUNK,
)


def job_namespace(team):
    return namespace_of(team.slug)


# --- quota: what the team's namespace holds for batch ---


def running_allotment(team_ids):
    """(team id, flavor slug, resource name, GPUs) of released and running jobs: the
    batch part of each team's namespace quota (registered with hooks.on_extra_quota).
    One query."""
    rows = (
        BatchJob.objects.filter(team_id__in=team_ids, status__in=BatchJob.HOLDING)
        .values("team_id", "flavor__slug", "flavor__resource_name")
        .annotate(gpus=Sum(F("gpus") * F("parallelism")))
        .order_by()
    )
    return [(r["team_id"], r["flavor__slug"], r["flavor__resource_name"], r["gpus"]) for r in rows]


# --- the Job wanted for a job ---


def manifest(job):
    """The Job for `job` (flavor and team loaded) in its current status."""
    released = job.status in (*BatchJob.HOLDING, *BatchJob.FINISHED)
    obj = manifests.batch_job(
        job_id=job.pk,
        namespace=job_namespace(job.team),
        team_slug=job.team.slug,
        window_id=job.window_id,
        opens_at=job.opens_at,
        image=job.image,
        command=job.command,
        args=job.args,
        env=job.env,
        resource_name=job.flavor.resource_name,
        gpus_per_pod=job.gpus,
        parallelism=job.parallelism,
        completions=job.completions,
        node_selector=job.flavor.node_selector,
        tolerations=job.flavor.tolerations,
        spot_allowed=job.spot_allowed and job.window is not None and job.window.spot_allowed,
        spot_label=settings.PORTAL_BATCH_SPOT_LABEL,
        suspend=not released,
        active_deadline_seconds=job.deadline_seconds if released else None,
        annotations=job.annotations,
        dra=job.flavor.is_dra,
    )
    if job.status in BatchJob.FINISHED:
        obj["spec"]["ttlSecondsAfterFinished"] = settings.PORTAL_BATCH_JOB_TTL
    return obj


def claim_template(job, *, owner_uid):
    """The ResourceClaimTemplate of a DRA job (flavor and team loaded), owned by its
    Job (`owner_uid`)."""
    return manifests.batch_claim_template(
        job_id=job.pk,
        namespace=job_namespace(job.team),
        team_slug=job.team.slug,
        window_id=job.window_id,
        opens_at=job.opens_at,
        device_class=job.flavor.device_class,
        device_selector=job.flavor.device_selector,
        gpus=job.gpus,
        owner_uid=owner_uid,
    )


def sync_job(job_id, *, cluster=None):
    """Make the job's Job match its status. Idempotent; None if nothing to do.

    One API call (an apply or a delete); raises kube errors after recording them.
    """
    result = sync_jobs([job_id], cluster=cluster).get(job_id)
    if isinstance(result, Exception):
        raise result
    return result


def sync_jobs(job_ids, *, cluster=None):
    """`sync_job` for several jobs: {job id: "applied" | "deleted" | the kube error met
    (recorded)}; a job with nothing to do, or leased by another worker, is left out.

    A window's opening syncs thousands: one claim (UPDATE) and one read (SELECT) for
    all the ids, one API call each, then one finish (UPDATE) per generation (one in a
    burst) rather than three queries a job.
    """
    token = job_sync.claim_many(job_ids, pending=job_sync.newer_generation())
    rows = list(
        JobSync.objects.filter(job_id__in=job_ids, claim_token=token)
        .select_related("job__team", "job__flavor", "job__window")
        .order_by("job_id")
    )
    cluster = (cluster or kube.cluster()) if rows else None
    results, synced = {}, {}
    for row in rows:
        job = row.job
        try:
            if job.status in (Status.CANCELLED, Status.PREEMPTED, Status.QUEUED):
                # Queued again (plan revised, or preempted): planning creates it anew.
                # A DRA job's claim template goes with it (owned by the Job).
                cluster.delete("Job", job.kubernetes_name, job_namespace(job.team))
                results[job.pk] = "deleted"
            else:
                live = cluster.apply(
                    manifest(job), field_manager=settings.PORTAL_KUBE_FIELD_MANAGER
                )
                if job.flavor.is_dra:
                    # One more call: the template its pods' claims are made from,
                    # owned by the Job so the garbage collector deletes it with the
                    # Job (cancel, requeue, TTL). Made while the Job is suspended.
                    template = claim_template(job, owner_uid=live["metadata"]["uid"])
                    cluster.apply(template, field_manager=settings.PORTAL_KUBE_FIELD_MANAGER)
                results[job.pk] = "applied"
        except kube.ClusterError as exc:
            results[job.pk] = _record_error(job.pk, row.generation, token, exc)
        else:
            synced[job.pk] = row.generation
    if synced:
        job_sync.finish_many(synced, token, last_error="")
        shown = [r.job_id for r in rows if r.job_id in synced and r.job.cluster_message]
        if shown:
            BatchJob.objects.filter(pk__in=shown, cluster_message__startswith="Cluster:").update(
                cluster_message=""
            )
    return results


def _record_error(job_id, generation, token, exc):
    """Give the job's lease back with the error shown on its page; the error to raise:
    a 404 (the team's namespace is not there yet, its sync was queued with the plan)
    is worth trying again, unlike the API refusing the Job itself."""
    refused = isinstance(exc, kube.PermanentClusterError) and exc.status != 404
    message = exc.message if isinstance(exc, kube.PermanentClusterError) else str(exc)
    fields = {"last_error": message}
    if refused:
        fields["refused_generation"] = generation
    job_sync.release(job_id, token, **fields)
    BatchJob.objects.filter(pk=job_id).update(cluster_message=f"Cluster: {message}")
    if not refused and not isinstance(exc, kube.TransientClusterError):
        return kube.TransientClusterError(message, status=exc.status)
    return exc


def changed(job_ids):
    """Jobs whose wanted Job changed, inside the caller's transaction: mark, and queue
    their syncs on commit, CHUNK jobs a message (a broker outage is logged; the sweep
    resends whatever is left)."""
    job_ids = sorted(job_ids)
    if not job_ids:
        return
    job_sync.mark_many(job_ids)
    transaction.on_commit(lambda: job_sync.enqueue(job_ids))


# --- release ---


def _deadline(job, now):
    """activeDeadlineSeconds at release: its maximum runtime, or what is left of its
    occurrence if less."""
    left = int((job.closes_at - now).total_seconds())
    return max(1, min(job.max_runtime_minutes * 60, left))


def _held_by_budget(due, now):
    """{job id: reason} of the due jobs a hard budget holds back at their release:
    per team, in release order, each job's cost for its whole deadline (the most it
    can cost) against what the team has left (hooks.budget_left: billing's running
    total, the reservations of jobs released before included). A job an admin
    released past the budget is never held, and counts."""
    left = hooks.budget_left({job.team_id for job in due}, now)
    held = {}
    for job in due:
        if job.team_id not in left:
            continue
        cost = job.cost_of(_deadline(job, now))
        if cost > left[job.team_id] and not job.budget_override:
            held[job.pk] = (
                f"Held at its release by {job.team.name}'s budget: its cost for its whole "
                f"deadline ({money(cost)}) would take the team past it "
                f"({money(max(left[job.team_id], 0))} left this month). A platform admin "
                "can release it past the budget."
            )
            continue
        left[job.team_id] -= cost
    return held


def _hold(job, reason):
    """Back in the queue, its occurrence forgotten (the sync deletes its suspended Job);
    the planner holds it while the budget does."""
    jobs.move(
        job,
        to=Status.QUEUED,
        allowed_from=[Status.PLANNED],
        action=Action.UNPLAN,
        reason=reason,
        explanation=reason,
        **dict.fromkeys(("window", "opens_at", "closes_at", "planned_start", "planned_end")),
    )


def release_due(now=None, *, limit=5000):
    """Release every planned job whose start has come, within its team's hard budget:
    one transaction, a few queries however many (a window's opening is a burst).
    Each job released reserves its cost for its whole deadline (`reserved_cost`).
    Returns the ids released."""
    now = now or clock.now()
    with transaction.atomic():
        due = list(
            BatchJob.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=Status.PLANNED, planned_start__lte=now, closes_at__gt=now)
            .select_related("team", "flavor", "window")
            .order_by("planned_start", "pk")[:limit]
        )
        if not due:
            return []
        held = _held_by_budget(due, now)
        for job in due:
            if job.pk in held:
                _hold(job, held[job.pk])
        if held:
            changed(list(held))
            PlannerState.objects.filter(pk=1).update(dirty=True)  # the tick plans again
        due = [job for job in due if job.pk not in held]
        if not due:
            return []
        # One UPDATE and one INSERT of history per deadline (close, maximum runtime):
        # the jobs of an occurrence share a close, so a burst costs a handful of
        # statements, not one per job.
        groups = defaultdict(list)
        for job in due:
            groups[_deadline(job, now)].append(job)
        for deadline, group in groups.items():
            jobs.move_many(
                group,
                to=Status.RELEASED,
                allowed_from=[Status.PLANNED],
                action=Action.RELEASE,
                reason=f"Window open; activeDeadlineSeconds {deadline}.",
                released_at=now,
                deadline_seconds=deadline,
            )
        for job in due:
            job.reserved_cost = job.cost_of(job.deadline_seconds)
        BatchJob.objects.bulk_update(due, ["reserved_cost"], batch_size=500)
        ids = [job.pk for job in due]
        # The namespace quota grows by the released jobs' GPUs (running_allotment).
        hooks.quota_changed_many({job.team_id for job in due})
        changed(ids)
        transaction.on_commit(lambda: emails.send_released(ids), robust=True)
    return ids
