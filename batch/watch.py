"""Batch jobs' status read back from the cluster: the watch of their Jobs, each
Job's outcome recorded on its job (started, finished, preempted and queued
again), and idle's requeue of a job on the cluster.
"""

import contextlib
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from batch import actions, emails, jobs, launch, manifests
from batch.models import BatchJob, WatchState
from cluster import clock, kube
from teams import hooks, inputs
from teams.notices import Notice, absolute

log = logging.getLogger(__name__)

Status = BatchJob.Status
Action = jobs.Action
SELECTOR = f"app.kubernetes.io/managed-by={manifests.MANAGED_BY},{manifests.JOB_LABEL}"


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
    """Move the job a Job object speaks for, and show its events and log tail.

    A Job speaks for batch job N only as the Job the portal made for it: named
    `batch-N` in its team's namespace. Its label alone says nothing: any member
    can put the label on a Job in their own namespace."""
    now = now or clock.now()
    job_id = _job_id(obj)
    if job_id is None:
        return None
    job = BatchJob.objects.select_related("team", "flavor").filter(pk=job_id).first()
    if job is None or job.status not in (Status.RELEASED, Status.RUNNING):
        return None
    namespace = launch.job_namespace(job.team)
    meta = obj.get("metadata") or {}
    if (meta.get("namespace"), meta.get("name")) != (namespace, manifests.job_name(job.pk)):
        log.warning(
            "Job %s/%s is labelled %s=%s but is not that job's Job (%s/%s): ignored",
            meta.get("namespace"),
            meta.get("name"),
            manifests.JOB_LABEL,
            job_id,
            namespace,
            manifests.job_name(job.pk),
        )
        return None
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
            moved = jobs.move(
                job,
                to=to,
                allowed_from=[job.status],
                action=Action.FINISH,
                reason=reason,
                finished_at=now,
                used_gpu_seconds=actions.used_gpu_seconds(job, started, now),
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
                launch.changed([job.pk])
                transaction.on_commit(lambda: actions.request_plan("job finished"))
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
    launch.changed([job.pk])
    transaction.on_commit(lambda: actions.request_plan("job requeued: idle"))
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
            minutes = (parse_datetime(ended) - parse_datetime(started)).total_seconds() / 60
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
