"""Batch pages: the calendar, job list, job form and job detail. Views parse
input and call `batch.actions`; htmx requests get the partial they swap."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework.exceptions import ValidationError as FilterError

from batch import actions, calendar, eta, waiting
from batch.api import filter_jobs, visible_jobs
from batch.forms import BatchJobForm
from batch.launch import job_namespace
from batch.models import BatchJob, BatchWindow
from cluster import clock
from teams import access, errors, formats, inputs
from teams.forms import ReasonForm


def _get_job_for_user(user, pk):
    """The job if `user` may see it (its team's members, admins), else 404."""
    jobs = visible_jobs(user).select_related("team", "flavor", "window", "created_by")
    return get_object_or_404(jobs, pk=pk)


@login_required
def calendar_view(request):
    """A week per flavor (?week=0, 1, ... within the planning horizon): each opening of a
    window a block in its day, the planned jobs inside; the same as a table below."""
    now = clock.now()
    ends_at = now + actions.horizon()
    weeks = max(actions.horizon().days // 7, 1)
    # Past the horizon: its last week (a link kept from yesterday); not a number: the first.
    shown = min(inputs.whole_number(request.GET.get("week", "0")) or 0, weeks - 1)
    windows = actions.windows_with_occurrences(now, ends_at)
    reviewer = access.can_review(request.user)
    team_ids = [] if reviewer else [t.pk for t in access.teams_for(request.user)]
    # Admins see the whole; a share is a member's view.
    rows = calendar.occurrence_rows(windows, team_ids=team_ids)
    by_flavor = {}
    for row in rows:
        for cell in row["flavors"]:
            by_flavor.setdefault(cell["flavor"], []).append({**row, "cell": cell})
    zone = timezone.get_current_timezone()
    first_day = timezone.localdate(now) + timedelta(days=7 * shown)
    flavors = [
        {
            "flavor": flavor,
            "rows": flavor_rows,
            "week": calendar.week(
                flavor_rows, first_day, zone, team_ids=set(team_ids), everyone=reviewer
            ),
        }
        for flavor, flavor_rows in sorted(by_flavor.items(), key=lambda item: item[0].name)
    ]
    context = {
        "flavors": flavors,
        "days": actions.horizon().days,
        "week_number": shown,
        "weeks": weeks,
        "first_day": first_day,
        "last_day": first_day + timedelta(days=6),
        "hours": [(hour, hour / 24 * 100) for hour in range(0, 24, 3)],
        "reviewer": reviewer,
        "windows": BatchWindow.objects.prefetch_related("capacities__flavor"),
    }
    return render(request, "batch/calendar.html", context)


@login_required
def job_list(request):
    jobs = visible_jobs(request.user).select_related("team", "flavor", "window")
    try:
        jobs = filter_jobs(jobs, request.GET)
    except FilterError as exc:
        messages.error(request, " ".join(str(m) for ms in exc.detail.values() for m in ms))
        jobs = jobs.none()
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    now = clock.now()
    for job in page:
        job.actual = actions.actual(job, now)
    context = {
        "page": page,
        "statuses": BatchJob.Status.choices,
        "teams": access.teams_for(request.user),
        "windows": BatchWindow.objects.all(),
        "selected": request.GET,
    }
    return render(request, "batch/job_list.html", context)


@login_required
def job_new(request):
    form = BatchJobForm(request.user, request.POST or None)
    if request.method == "POST" and request.GET.get("validate"):
        form.is_valid()
        for name in list(form.errors):
            if name not in form.fields or not request.POST.get(name, "").strip():
                del form.errors[name]
        context = {"form": form, "estimate": form.estimate(), "live": True}
        return render(request, "batch/job_new.html#feedback", context)
    if request.method == "POST" and form.is_valid():
        try:
            job = actions.submit(by=request.user, **form.submitted())
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, f"Batch job #{job.pk} queued.")
            return redirect("batch_job_detail", pk=job.pk)
    context = {"form": form, "estimate": form.estimate() if form.is_bound else None}
    return render(request, "batch/job_new.html", context)


@login_required
def job_detail(request, pk):
    job = _get_job_for_user(request.user, pk)
    context = {
        "job": job,
        "actual": actions.actual(job, clock.now()),
        "events": job.events.select_related("actor"),
        "namespace": job_namespace(job.team),
        "can_cancel": job.can_cancel and actions.can_cancel(request.user, job),
        "waiting": waiting.explain(job),
        "eta_days": eta.HISTORY_DAYS,
        "can_release": access.can_review(request.user),
    }
    return render(request, "batch/job_detail.html", context)


@login_required
def job_cancel(request, pk):
    """GET: the confirmation page (templates/confirm.html); POST: cancel."""
    job = _get_job_for_user(request.user, pk)
    if request.method != "POST":
        return _confirm_cancel(request, job)
    if _with_reason(request, job, actions.cancel):
        done = f"Batch job #{job.pk} cancelled."
        if job.started_at is not None:
            done += " Its Job is deleted from the cluster; the GPU-time it held so far is charged."
        messages.success(request, done)
    return redirect("batch_job_detail", pk=job.pk)


def _with_reason(request, job, action):
    """Run `action(job, by=, reason=)` with the posted reason; True if it was done.
    A bad reason or a refused move is a message on the job's page, not an error page."""
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["reason"]))
        return False
    try:
        action(job, by=request.user, reason=form.cleaned_data["reason"])
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.ActionError as exc:
        messages.error(request, str(exc))
        return False
    return True


@login_required
@require_POST
def job_release_past_budget(request, pk):
    job = _get_job_for_user(request.user, pk)
    if _with_reason(request, job, actions.release_past_budget):
        messages.success(request, f"Batch job #{job.pk} may run past its team's budget.")
    return redirect("batch_job_detail", pk=job.pk)


def _confirm_cancel(request, job):
    if not actions.can_cancel(request.user, job):
        raise PermissionDenied(
            "Only the submitter, a team manager or an admin can cancel this job."
        )
    if not job.can_cancel:
        status = job.get_status_display().lower()
        messages.error(request, f"Batch job #{job.pk} is {status}: there is nothing to cancel.")
        return redirect("batch_job_detail", pk=job.pk)
    explanation = "It leaves the plan; submit it again to run it later."
    button = "Cancel job"
    if job.status in BatchJob.HOLDING:
        actual = actions.actual(job, clock.now())
        explanation = (
            f"Its Job {job_namespace(job.team)}/{job.kubernetes_name} is deleted from the "
            "cluster and its pods stop."
        )
        if actual:
            explanation += (
                f" The GPU time it held so far is charged: {actual['gpu_hours']:.2f} "
                f"GPU-hours, {formats.money(actual['cost'])} by now."
            )
        button = "Stop and cancel job"
    context = {
        "title": f"Cancel batch job #{job.pk} ({job.name})?",
        "explanation": explanation,
        "button": button,
        "reason": "",
        "back": reverse("batch_job_detail", args=[job.pk]),
    }
    return render(request, "confirm.html", context)
