"""Batch jobs on the cluster: each job's Job made to match its status (through the
outbox), release at the planned start, and status read back by watch.

- planned: the Job exists, suspended, so bad specs and quota errors show early;
- released / running: unsuspended with activeDeadlineSeconds fixed at release;
- finished: `ttlSecondsAfterFinished` set, now that the outcome is recorded;
- queued again, cancelled, preempted: the Job deleted with propagationPolicy Background.
"""

import contextlib
import logging
import uuid
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Sum
from django.urls import reverse
from django.utils import timezone

from batch import emails, jobs, manifests
from batch.models import BatchJob, JobSync, WatchState
from cluster import clock, kube
from cluster.outbox import Outbox
from gpu_requests import hooks, inputs
from gpu_requests.notices import Notice, absolute
from provisioning.manifests import namespace_name

log = logging.getLogger(__name__)
Status = BatchJob.Status
Action = jobs.Action
SELECTOR = f"app.kubernetes.io/managed-by={manifests.MANAGED_BY},{manifests.JOB_LABEL}"

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
    return namespace_name(team.slug, settings.PORTAL_NAMESPACE_PREFIX)


# --- quota: what the team's namespace holds for batch ---


def running_allotment(team_ids):
    """(team id, resource name, GPUs) of released and running jobs: the batch part of
    each team's namespace quota (registered with hooks.on_extra_quota). One query."""
    rows = (
        BatchJob.objects.filter(team_id__in=team_ids, status__in=BatchJob.HOLDING)
        .values("team_id", "flavor__resource_name")
        .annotate(gpus=Sum(F("gpus") * F("parallelism")))
        .order_by()
    )
    return [(r["team_id"], r["flavor__resource_name"], r["gpus"]) for r in rows]


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


def release_due(now=None, *, limit=5000):
    """Release every planned job whose start has come: one transaction, a few queries
    however many (a window's opening is a burst). Returns the ids released."""
    now = now or clock.now()
    with transaction.atomic():
        due = list(
            BatchJob.objects.select_for_update(skip_locked=True)
            .filter(status=Status.PLANNED, planned_start__lte=now, closes_at__gt=now)
            .order_by("planned_start", "pk")[:limit]
        )
        if not due:
            return []
        # One UPDATE and one INSERT of history per deadline (close, maximum runtime):
        # the jobs of an occurrence share a close, so a burst costs a handful of
        # statements, not one per job.
        groups = defaultdict(list)
        for job in due:
            left = int((job.closes_at - now).total_seconds())
            groups[max(1, min(job.max_runtime_minutes * 60, left))].append(job)
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
        ids = [job.pk for job in due]
        # The namespace quota grows by the released jobs' GPUs (running_allotment).
        hooks.quota_changed_many({job.team_id for job in due})
        changed(ids)
        transaction.on_commit(lambda: emails.send_released(ids), robust=True)
    return ids


# --- status from the cluster ---


def _condition(obj, kind):
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def waits_for_claims(pod):
    """True if `pod` is Pending with a ResourceClaim the claim controller has not made
    yet: over the team's DRA quota the pod is admitted and waits (the Job counts it
    active) while the controller retries, recording FailedResourceClaimCreation."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return False
    wanted = {
        claim.get("name")
        for claim in (pod.get("spec") or {}).get("resourceClaims") or []
        if claim.get("resourceClaimTemplateName")
    }
    made = {
        claim.get("name")
        for claim in status.get("resourceClaimStatuses") or []
        if claim.get("resourceClaimName")
    }
    return bool(wanted - made)


def outcome(obj, waiting=0):
    """(status, reason) a Job's conditions say, or None while it runs or waits.

    `waiting`: pods the Job counts active that wait for their ResourceClaims
    (`waits_for_claims`); a job with only those has not started, as an
    extended-resource job whose pods the quota refuses has none."""
    if _condition(obj, "Complete"):
        return Status.SUCCEEDED, "Completed."
    failed = _condition(obj, "Failed")
    if failed:
        if failed.get("reason") == "DeadlineExceeded":
            return Status.DEADLINE_EXCEEDED, "Stopped at its deadline: " + (
                failed.get("message") or "activeDeadlineSeconds reached."
            )
        return Status.FAILED, f"{failed.get('reason')}: {failed.get('message') or ''}".strip()
    status = obj.get("status") or {}
    if (status.get("active") or 0) > waiting or (status.get("ready") or 0) > 0:
        return Status.RUNNING, "Pods are running."
    return None


def _job_id(obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return inputs.whole_number(labels.get(manifests.JOB_LABEL, ""))


def record(obj, *, cluster, now=None):
    """Move the job a Job object speaks for, and show its events and log tail."""
    now = now or clock.now()
    job_id = _job_id(obj)
    if job_id is None:
        return None
    job = BatchJob.objects.select_related("team", "flavor").filter(pk=job_id).first()
    if job is None or job.status not in (Status.RELEASED, Status.RUNNING):
        return None
    namespace = job_namespace(job.team)
    details, waiting = _details(cluster, namespace, job)
    found = outcome(obj, waiting)
    tolerates = bool((obj.get("spec") or {}).get("podFailurePolicy"))
    if not tolerates and len(details.get("disrupted_pods", job.disrupted_pods)) > len(
        job.disrupted_pods
    ):
        # A pod lost to a reclaim, and the Job does not ignore disruptions: stop it
        # rather than let the loss count toward its backoff, and queue it again.
        found = (Status.PREEMPTED, "Pods lost to a disruption (spot reclaim or drain).")
    with transaction.atomic():
        BatchJob.objects.filter(pk=job.pk).update(**details)
        if found is None:
            return None
        to, reason = found
        if to == job.status:
            return None
        if to == Status.RUNNING:
            moved = jobs.move(
                job,
                to=to,
                allowed_from=[job.status],
                action=Action.START,
                reason=reason,
                started_at=now,
            )
        else:
            started = job.started_at or job.released_at or now
            seconds = int((now - started).total_seconds()) * job.total_gpus
            moved = jobs.move(
                job,
                to=to,
                allowed_from=[job.status],
                action=Action.FINISH,
                reason=reason,
                finished_at=now,
                used_gpu_seconds=max(seconds, 0),
            )
            if moved:
                hooks.quota_changed(job.team_id)
                hooks.notice(_outcome_notice(job, reason))
                if to == Status.PREEMPTED:
                    # The sync then deletes its Job.
                    _requeue(job, Action.REQUEUE, "Back in the queue after a spot reclaim.")
                    transaction.on_commit(lambda: emails.send_preempted(job.pk), robust=True)
                else:
                    transaction.on_commit(lambda: emails.send_finished(job.pk), robust=True)
                changed([job.pk])
                from batch.actions import request_plan

                transaction.on_commit(lambda: request_plan("job finished"))
        return to if moved else None


def _outcome_notice(job, reason):
    """A finished (or preempted) job, for the team's and the admins' webhooks."""
    status = Status(job.status)
    return Notice(
        event=f"batch_job_{status.value}",
        team_id=job.team_id,
        title=f"Batch job #{job.pk} “{job.name}” of {job.team.name}: {status.label.lower()}",
        url=absolute(reverse("batch_job_detail", args=[job.pk])),
        text=reason,
        facts=(
            ("Team", job.team.name),
            ("GPUs", f"{job.total_gpus} x {job.flavor.name}"),
            ("Status", status.label),
        ),
        data={
            "batch_job": job.pk,
            "team": job.team.slug,
            "flavor": job.flavor.slug,
            "status": status.value,
            "used_gpu_seconds": job.used_gpu_seconds,
        },
    )


def _requeue(job, action, reason):
    """Back in the queue from the status read, its occurrence and release forgotten;
    True if it moved."""
    fields = dict.fromkeys(
        ("window_id", "opens_at", "closes_at", "planned_start", "planned_end", "released_at"),
        None,
    )
    return jobs.move(
        job, to=Status.QUEUED, allowed_from=[job.status], action=action, reason=reason, **fields
    )


def requeue_idle(job_id, reason):
    """An idle policy's action on a released or running job, in the caller's
    transaction: back in the queue for the next window that fits, with `reason` in
    its history, as after a spot reclaim (the sync deletes its Job, so its pods go).
    The job, or None if it was not on the cluster."""
    job = (
        BatchJob.objects.select_related("team", "flavor", "created_by")
        .filter(pk=job_id, status__in=BatchJob.HOLDING)
        .first()
    )
    if job is None:
        return None
    if not _requeue(job, Action.IDLE_REQUEUE, reason):
        return None
    hooks.quota_changed(job.team_id)
    changed([job.pk])
    from batch.actions import request_plan

    transaction.on_commit(lambda: request_plan("job requeued: idle"))
    return job


def _details(cluster, namespace, job):
    """Warning events of the Job and its pods, the log tail, GPU-minutes lost to
    disruptions; and how many of its pods wait for their ResourceClaims. Two or
    three API calls."""
    name = job.kubernetes_name
    warnings = [
        {"reason": e.get("reason"), "message": e.get("message"), "count": e.get("count") or 1}
        for e in cluster.list("Event", namespace=namespace, field_selector="type=Warning")
        if ((e.get("involvedObject") or {}).get("name") or "").startswith(name)
    ]
    pods = cluster.list("Pod", namespace=namespace, label_selector=f"job-name={name}")
    details = {"cluster_events": warnings[-10:]}
    lost, seen = 0, set(job.disrupted_pods)
    for pod in pods:
        uid = pod["metadata"].get("uid")
        if uid in seen or not _condition(pod, "DisruptionTarget"):
            continue
        seen.add(uid)
        started = (pod.get("status") or {}).get("startTime")
        ended = pod["metadata"].get("deletionTimestamp") or clock.now().isoformat()
        if started:
            minutes = (_parse(ended) - _parse(started)).total_seconds() / 60
            lost += max(0, round(minutes)) * job.gpus
    if lost or len(seen) != len(job.disrupted_pods):
        details["disrupted_pods"] = sorted(seen)
        details["lost_gpu_minutes"] = job.lost_gpu_minutes + lost
    started_pods = [p for p in pods if (p.get("status") or {}).get("startTime")]
    if started_pods:
        last = max(started_pods, key=lambda p: p["status"]["startTime"])
        # A pod gone meanwhile has no log: keep the last one we read.
        with contextlib.suppress(kube.ClusterError):
            details["log_tail"] = cluster.pod_log(namespace, last["metadata"]["name"])[-4000:]
    return details, sum(1 for pod in pods if waits_for_claims(pod))


def _parse(stamp):
    from django.utils.dateparse import parse_datetime

    return parse_datetime(stamp)


# --- the watch ---


def _claim_watch(now):
    WatchState.objects.get_or_create(pk=1)
    token = uuid.uuid4().hex
    lease = now + timedelta(seconds=settings.PORTAL_BATCH_WATCH_SECONDS * 3)
    claimed = (
        WatchState.objects.filter(pk=1)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=lease, claim_token=token)
    )
    return token if claimed else None


def watch_jobs(*, cluster=None, seconds=None):
    """Follow batch Jobs for a while, resuming from the stored resourceVersion.

    A missing or expired version (410 Gone) or a due relist lists them all again.
    One LIST or one WATCH call, plus two or three calls per job that changed.
    Returns the number of Job objects looked at, or None if another worker watches.
    """
    now = timezone.now()
    token = _claim_watch(now)
    if token is None:
        return None
    cluster = cluster or kube.cluster()
    seconds = seconds or settings.PORTAL_BATCH_WATCH_SECONDS
    state = WatchState.objects.get(pk=1)
    seen = 0
    try:
        relist_due = state.listed_at is None or now - state.listed_at > timedelta(
            seconds=settings.PORTAL_BATCH_RELIST_SECONDS
        )
        if not state.resource_version or relist_due:
            items, version = cluster.list_versioned("Job", label_selector=SELECTOR)
            for obj in items:
                record(obj, cluster=cluster)
            WatchState.objects.filter(pk=1, claim_token=token).update(
                resource_version=version, listed_at=now
            )
            return len(items)
        version = state.resource_version
        for event in cluster.watch(
            "Job", resource_version=version, label_selector=SELECTOR, timeout_seconds=seconds
        ):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:
                    version = ""  # too old: list again next time
                    break
                continue
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if event.get("type") in ("ADDED", "MODIFIED"):
                record(obj, cluster=cluster)
                seen += 1
        WatchState.objects.filter(pk=1, claim_token=token).update(resource_version=version)
        return seen
    finally:
        WatchState.objects.filter(pk=1, claim_token=token).update(
            claimed_until=None, claim_token=""
        )
