"""Emails about batch jobs to the people who submitted them, sent after the change
that causes them commits (`transaction.on_commit(..., robust=True)`, as quota
requests' are). Few and useful, each saying what happened and why:

- released at a window's opening: one email per person per opening, listing their
  jobs and when each is stopped at the latest (and what sets that time);
- finished: succeeded, failed (the cluster's reason), or stopped at its deadline;
- preempted: a spot reclaim the job does not tolerate sent it back to the queue;
- moved: the planner took it out of the occurrence it had (the planner's words).

Planning a new job, moves within its occurrence, a spot reclaim replaced in place
and the submitter's own cancel send nothing: the job's page shows them.
"""

from collections import defaultdict
from datetime import timedelta

from django.urls import reverse

from batch import occurrences
from batch.models import BatchJob
from teams.emails import send

Status = BatchJob.Status


def _by_submitter(job_ids):
    """{email: [job]} of the jobs' active submitters with an address. One query."""
    jobs = (
        BatchJob.objects.filter(pk__in=job_ids)
        .select_related("created_by", "team", "flavor", "window")
        .order_by("pk")
    )
    people = defaultdict(list)
    for job in jobs:
        if job.created_by.is_active and job.created_by.email:
            people[job.created_by.email].append(job)
    return people


def _when(moment, tz_name):
    return f"{moment.astimezone(occurrences.zone(tz_name)):%a %d %b %H:%M} {tz_name}"


def _send(template_context, subject, email, jobs, reason_of):
    items = [
        {"job": job, "url": reverse("batch_job_detail", args=[job.pk]), "reason": reason_of(job)}
        for job in jobs
    ]
    send("batch_jobs", subject, [email], {**template_context, "items": items})


def _subject(jobs, what):
    if len(jobs) == 1:
        return f"[GPU portal] Batch job #{jobs[0].pk} {jobs[0].name} {what}"
    return f"[GPU portal] {len(jobs)} batch jobs {what}"


def _release_reason(job):
    stop = job.released_at + timedelta(seconds=job.deadline_seconds)
    if job.deadline_seconds < job.max_runtime_minutes * 60:
        why = "the window's close, before its maximum runtime runs out"
    else:
        why = f"its maximum runtime of {job.max_runtime_minutes} minutes"
    return (
        f"Released in {job.window.name} at {_when(job.released_at, job.window.timezone)}. "
        f"It is stopped by {_when(stop, job.window.timezone)} at the latest: {why}."
    )


def send_released(job_ids):
    """One email per submitter for the jobs released together."""
    for email, jobs in _by_submitter(job_ids).items():
        _send(
            {"headline": "The window opened: these batch jobs were released to the cluster."},
            _subject(jobs, "released"),
            email,
            jobs,
            _release_reason,
        )


def _last_reason(job, to_status):
    """The reason of the job's last move to `to_status`, as a sentence. One query."""
    event = job.events.filter(to_status=to_status).order_by("-created_at", "-pk").first()
    reason = (event.reason if event else "").strip()
    return reason if not reason or reason.endswith(".") else f"{reason}."


def send_finished(job_id):
    for email, jobs in _by_submitter([job_id]).items():
        (job,) = jobs
        used = job.used_gpu_seconds / 3600
        _send(
            {"headline": f"A batch job ended: {job.get_status_display().lower()}."},
            _subject(jobs, job.get_status_display().lower()),
            email,
            jobs,
            lambda job, used=used: (
                f"{_last_reason(job, job.status)} It used {used:.1f} GPU-hours "
                f"({job.total_gpus} GPUs)."
            ),
        )


def send_preempted(job_id):
    for email, jobs in _by_submitter([job_id]).items():
        _send(
            {
                "headline": "A batch job lost its pods to a spot reclaim and is back in the "
                "queue: the planner places it again."
            },
            _subject(jobs, "preempted and queued again"),
            email,
            jobs,
            lambda job: (
                f"{_last_reason(job, Status.PREEMPTED)} It may not run on spot, so its Job "
                f"does not replace lost pods in place: it starts again from the beginning. "
                f"{job.lost_gpu_minutes} GPU-minutes were lost."
            ),
        )


def send_moved(previous):
    """previous: {job id: where it was planned, in words}; one email per submitter."""
    for email, jobs in _by_submitter(list(previous)).items():
        _send(
            {"headline": "The planner moved these batch jobs out of the window they had."},
            _subject(jobs, "moved"),
            email,
            jobs,
            lambda job: f"Was planned for {previous[job.pk]}. {job.explanation}",
        )
