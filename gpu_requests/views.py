"""Server-rendered pages. Views parse input and call `actions`; nothing here
changes a status itself. htmx requests get the partial of the swap target,
everything else a full page, so every action also works without JavaScript."""

from collections import defaultdict
from datetime import UTC, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from gpu_requests import actions, capacity
from gpu_requests.forms import QuotaRequestForm, ReasonForm
from gpu_requests.models import AuditEvent, Flavor, QuotaRequest

Status = QuotaRequest.Status
HORIZON = timedelta(days=30)


def _get_request_for_user(user, pk):
    """The request if `user` may see it (its team's members, reviewers), else 404."""
    visible = QuotaRequest.objects.select_related("team", "flavor", "requested_by")
    if not actions.can_review(user):
        visible = visible.filter(team__memberships__user=user)
    return get_object_or_404(visible, pk=pk)


def _require_reviewer(user):
    # 403, not 404: the queue's address is no secret, only its contents are.
    if not actions.can_review(user):
        raise PermissionDenied("Only platform admins can review quota requests.")


# Dashboard


DASHBOARD_TEAMS = 20  # team panels per page
PENDING_SHOWN = 5  # pending requests listed per panel, the rest counted


@login_required
def dashboard(request):
    """A panel per team: quota, pending requests, recent decisions.

    Reviewers see every team, a page of panels at a time. Eight queries
    whatever the number of teams and requests: the team count and page (the
    sync row joined), the catalog, the reservations, the pending requests
    (the first few per team, with their count, by window functions) and the
    recent decisions.
    """
    reviewer = actions.can_review(request.user)
    # The sync row comes in the same query (a LEFT JOIN): the status badge costs nothing.
    teams = actions.teams_for(request.user).select_related("sync").order_by("name", "pk")
    selected = request.GET.get("team", "")
    if selected:
        teams = teams.filter(slug=selected)
    page = Paginator(teams, DASHBOARD_TEAMS).get_page(request.GET.get("page"))
    teams = list(page.object_list)
    now = timezone.now()
    team_ids = [team.pk for team in teams]
    quota = _quota_by_team(team_ids, now)
    pending = defaultdict(list)
    for req in _first_pending(team_ids):
        pending[req.team_id].append(req)
    recent = defaultdict(list)
    for event in _recent_events(team_ids):
        recent[event.team_id].append(event)
    panels = [
        {
            "team": team,
            "quota": quota.get(team.pk, []),
            "pending": pending[team.pk],
            "pending_count": pending[team.pk][0].pending_count if pending[team.pk] else 0,
            "recent": recent[team.pk],
            "spend_per_day": sum(row["spend_per_day"] for row in quota.get(team.pk, [])),
        }
        for team in teams
    ]
    context = {
        "panels": panels,
        "page": page,
        # Names only, for the filter: no model instance per team.
        "all_teams": actions.teams_for(request.user).values_list("slug", "name")
        if reviewer
        else [],
        "query": urlencode({"team": selected}) if selected else "",
        "selected": selected,
        "show_filter": reviewer,
        "horizon_days": HORIZON.days,
        "reviewer": reviewer,
    }
    return render(request, "gpu_requests/dashboard.html", context)


def _first_pending(team_ids):
    """The first PENDING_SHOWN pending requests of each team, each row carrying its
    team's pending count. One query."""
    team = [F("team_id")]
    oldest_first = [F("starts_at").asc(), F("pk").asc()]
    return (
        QuotaRequest.objects.filter(team_id__in=team_ids, status=Status.PENDING)
        .annotate(
            rank=Window(RowNumber(), partition_by=team, order_by=oldest_first),
            pending_count=Window(Count("pk"), partition_by=team),
        )
        .filter(rank__lte=PENDING_SHOWN)
        .select_related("flavor", "requested_by")
        .order_by(*oldest_first)
    )


def _quota_by_team(team_ids, now):
    """{team_id: [row per flavor]}: reserved now, peak over the horizon, until when.

    Two queries (reservations, the catalog) however many teams and requests.
    """
    flavors = {flavor.pk: flavor for flavor in Flavor.objects.all()}
    held = defaultdict(list)
    for r in capacity.reservations(flavors, now, now + HORIZON, team_ids=team_ids):
        held[r.team_id, r.flavor_id].append(r)
    result = defaultdict(list)
    for (team_id, flavor_id), rows in sorted(
        held.items(), key=lambda item: flavors[item[0][1]].name
    ):
        flavor = flavors[flavor_id]
        gpus_now = sum(r.gpus for r in rows if r.covers(now))
        ends = [r.ends_at for r in rows]
        result[team_id].append(
            {
                "flavor": flavor,
                "gpus_now": gpus_now,
                "gpus_peak": capacity.peak(rows, now, now + HORIZON),
                "starts": min(r.starts_at for r in rows),
                "request_ids": sorted(r.pk for r in rows),
                "until": None if None in ends else max(ends),
                "spend_per_day": gpus_now * flavor.price_per_gpu_hour * 24,
                "shares_with": flavor.shares_resource_with(flavors.values()),
            }
        )
    return result


def _recent_events(team_ids, per_team=10):
    """The last `per_team` decisions people made for each team, in one query (a window function)."""
    newest_first = [F("created_at").desc(), F("pk").desc()]
    return (
        # Decisions by people: system transitions (activation, expiry) show as the
        # request's current status beside the decision, and a submission is no decision.
        # Team-level events (archive, sync_failed, drift_repaired) have no request to link to.
        AuditEvent.objects.filter(
            team_id__in=team_ids, quota_request__isnull=False, actor__isnull=False
        )
        .exclude(action=AuditEvent.Action.SUBMIT)
        .annotate(rank=Window(RowNumber(), partition_by=[F("team_id")], order_by=newest_first))
        .filter(rank__lte=per_team)
        .select_related("actor", "quota_request__flavor")
        .order_by(*newest_first)
    )


# New request


@login_required
def request_new(request):
    form = QuotaRequestForm(request.user, request.POST or None)
    if request.method == "POST" and request.GET.get("validate"):
        return _validation_feedback(request, form)
    if request.method == "POST" and form.is_valid():
        try:
            quota_request = actions.submit(by=request.user, **form.cleaned_data)
        except ValidationError as exc:
            # Someone changed the catalog or membership since clean(): same errors, same place.
            form.add_error(None, exc)
        else:
            messages.success(request, f"Request #{quota_request.pk} submitted for review.")
            return redirect("request_detail", pk=quota_request.pk)
    context = {"form": form, "estimate": form.estimate() if form.is_bound else None}
    return render(request, "gpu_requests/request_new.html", context)


def _validation_feedback(request, form):
    """The live check: errors only for fields the user has filled in so far."""
    form.is_valid()
    for name in list(form.errors):
        if name not in form.fields or not request.POST.get(name, "").strip():
            del form.errors[name]
    context = {"form": form, "estimate": form.estimate(), "live": True}
    return render(request, "gpu_requests/request_new.html#feedback", context)


# Request detail and its actions


@login_required
def request_detail(request, pk):
    quota_request = _get_request_for_user(request.user, pk)
    user = request.user
    pending = quota_request.status == Status.PENDING
    reviewer = actions.can_review(user)
    context = {
        "req": quota_request,
        "events": quota_request.events.select_related("actor"),
        "can_cancel": pending and actions.can_cancel(user, quota_request),
        "can_decide": pending and reviewer,
        "can_revoke": reviewer and quota_request.status in QuotaRequest.RESERVING,
        "capacity": capacity.capacity_view(quota_request) if reviewer and pending else None,
        "shares_with": quota_request.flavor.shares_resource_with(),
    }
    return render(request, "gpu_requests/request_detail.html", context)


def _act(request, pk, action):
    """Run one action on a request and answer with the queue row (htmx) or a redirect."""
    quota_request = _get_request_for_user(request.user, pk)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        level, text = messages.ERROR, " ".join(form.errors["reason"])
    else:
        try:
            getattr(actions, action)(
                quota_request, by=request.user, reason=form.cleaned_data["reason"]
            )
        except actions.NotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except actions.ActionError as exc:
            level, text = messages.ERROR, str(exc)
        else:
            level, text = (
                messages.SUCCESS,
                f"Request #{quota_request.pk} {AuditEvent.label_of(action).lower()}.",
            )
    if request.htmx:
        return _review_row_response(request, quota_request.pk, level, text)
    messages.add_message(request, level, text)
    return redirect(_next_url(request, quota_request))


def _next_url(request, quota_request):
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("request_detail", args=[quota_request.pk])


@require_POST
@login_required
def request_cancel(request, pk):
    return _act(request, pk, "cancel")


@require_POST
@login_required
def request_approve(request, pk):
    return _act(request, pk, "approve")


@require_POST
@login_required
def request_reject(request, pk):
    return _act(request, pk, "reject")


@require_POST
@login_required
def request_revoke(request, pk):
    return _act(request, pk, "revoke")


# Review queue

QUEUE_PAGE_SIZE = 25


def _pending():
    return (
        QuotaRequest.objects.filter(status=Status.PENDING)
        .select_related("team", "flavor", "requested_by")
        .order_by("created_at", "pk")
    )


@login_required
def review_queue(request):
    """Pending requests, oldest first, a page at a time, each with its capacity.

    Nine queries whatever the number of requests: the count, the page, the
    reservations its rows can meet, the catalog and the reservations of the
    next 30 days (plus one per registered reservation source, twice).
    """
    _require_reviewer(request.user)
    page = Paginator(_pending(), QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    views = capacity.capacity_views(page.object_list)
    rows = [{"req": req, "capacity": views[req.pk]} for req in page.object_list]
    context = {"rows": rows, "page": page, "pending_count": page.paginator.count, **_upcoming()}
    return render(request, "gpu_requests/review_queue.html", context)


def _upcoming():
    """Peak reserved GPUs per UTC day for the next 30 days, per active flavor (two queries)."""
    today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    flavors = list(Flavor.objects.filter(is_active=True))
    outlook = capacity.daily_peaks(flavors, today, days=HORIZON.days)
    for row in outlook:
        row["shares_with"] = row["flavor"].shares_resource_with(flavors)
    return {
        "upcoming": outlook,
        "horizon_days": HORIZON.days,
    }


def _shown_ids(request):
    """The request ids of the queue page the decision was made on (its `shown` field)."""
    ids = set()
    for part in request.POST.get("shown", "").split(",")[: QUEUE_PAGE_SIZE * 2]:
        if part.strip().isdigit() and len(part.strip()) < 12:
            ids.add(int(part))
    return ids


def _review_row_response(request, pk, level, text):
    """The decided row, and out of band whatever else on the page it changed: the
    pending count and, after an approval, the capacity cells of the page's rows
    whose figures moved and the upcoming-capacity table. One response."""
    quota_request = _get_request_for_user(request.user, pk)
    row = {"req": quota_request, "message": text, "level": messages.DEFAULT_TAGS[level]}
    context = {"row": row, "oob": True, "changed": []}
    if actions.can_review(request.user):
        row["capacity"] = capacity.capacity_view(quota_request)
        context["pending_count"] = QuotaRequest.objects.filter(status=Status.PENDING).count()
        approved = quota_request.status in QuotaRequest.RESERVING and level == messages.SUCCESS
        if approved:
            context["changed"] = _changed_cells(quota_request, _shown_ids(request))
            context.update(_upcoming())
    return render(request, "gpu_requests/review_queue.html#decided", context)


def _changed_cells(approved, shown):
    """Rows of `shown` (still pending) whose capacity figures the approval changed."""
    same_flavor = (
        _pending()
        .filter(pk__in=shown - {approved.pk}, flavor_id=approved.flavor_id)
        .overlapping(approved.starts_at, approved.ends_at)
    )
    same_flavor = list(same_flavor)
    now = capacity.capacity_views(same_flavor)
    before = capacity.capacity_views(same_flavor, without={approved.pk})
    return [
        {"req": req, "capacity": now[req.pk]}
        for req in same_flavor
        if now[req.pk].peak != before[req.pk].peak
    ]
