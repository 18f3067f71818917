"""Server-rendered pages. Views parse input and call `actions`; nothing here
changes a status itself. htmx requests get the partial of the swap target,
everything else a full page, so every action also works without JavaScript."""

from collections import defaultdict
from datetime import UTC, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.contenttypes.models import ContentType
from django.contrib.contenttypes.prefetch import GenericPrefetch
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Count, F, Window
from django.db.models.expressions import RawSQL
from django.db.models.functions import RowNumber
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from cluster.capacity import capacity_of
from cluster.models import Flavor
from gpu_requests import actions, capacity, timeline
from gpu_requests.filters import RequestFilter
from gpu_requests.forms import FlavorPropertiesForm, QuotaRequestForm, flavor_offers
from gpu_requests.models import QuotaAction, QuotaRequest
from teams import access, errors, hooks, inputs
from teams.forms import ReasonForm
from teams.models import AuditEvent

Status = QuotaRequest.Status
HORIZON = timedelta(days=30)


def _visible_requests(user):
    """Requests `user` may see: their teams' (reviewers: all), with what a row shows."""
    visible = QuotaRequest.objects.select_related("team", "flavor", "requested_by")
    if not access.can_review(user):
        visible = visible.filter(team__memberships__user=user)
    return visible


def _get_request_for_user(user, pk):
    """The request if `user` may see it (its team's members, reviewers), else 404."""
    return get_object_or_404(_visible_requests(user), pk=pk)


def _require_reviewer(user):
    # 403, not 404: the queue's address is no secret, only its contents are.
    if not access.can_review(user):
        raise PermissionDenied("Only platform admins can review quota requests.")


# Dashboard


DASHBOARD_TEAMS = 20  # team panels per page
PENDING_SHOWN = 5  # pending requests listed per panel, the rest counted


@login_required
def dashboard(request):
    """A panel per team: quota, pending requests, recent decisions.

    Reviewers see every team, a page of panels at a time. Ten queries
    whatever the number of teams and requests: the team count and page (the
    sync row joined), the namespace quota on the cluster, the catalog, the
    reservations, the pending requests (the first few per team, with their
    count, by window functions), the recent decisions and their requests; and
    what other apps note of the teams (billing's quota nobody uses: two).
    """
    reviewer = access.can_review(request.user)
    # The sync row comes in the same query (a LEFT JOIN); the namespace quota as the
    # inventory task last read it (cluster's NamespaceQuota, by its reverse accessor)
    # in one more.
    teams = (
        access.teams_for(request.user)
        .select_related("sync")
        .prefetch_related("quota_usage")
        .order_by("name", "pk")
    )
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
    # What other apps add to the namespaces' quota now (batch windows): a query or so.
    extra = hooks.extra_quota(team_ids)
    # What other apps say of a team (billing: quota it holds and does not use).
    notes = hooks.dashboard_notes(team_ids, request.user)
    panels = [
        {
            "team": team,
            "quota": quota.get(team.pk, []),
            "cluster": _cluster_state(team, quota.get(team.pk, []), extra.get(team.pk, {}), now),
            "pending": pending[team.pk],
            "pending_count": pending[team.pk][0].pending_count if pending[team.pk] else 0,
            "recent": recent[team.pk],
            "spend_per_day": sum(row["spend_per_day"] for row in quota.get(team.pk, [])),
            "notes": notes.get(team.pk, []),
        }
        for team in teams
    ]
    context = {
        "panels": panels,
        "page": page,
        # Names only, for the filter: no model instance per team.
        "all_teams": access.teams_for(request.user).values_list("slug", "name") if reviewer else [],
        "query": urlencode({"team": selected}) if selected else "",
        "selected": selected,
        "show_filter": reviewer,
        "horizon_days": HORIZON.days,
        "reviewer": reviewer,
        "charge": settings.PORTAL_BILLING_CHARGE,
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
    """{team_id: [row per flavor and stretch of time]}: reserved now, peak over
    the horizon, until when. Requests of one flavor that follow each other
    without a gap are one row; a gap starts another.

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
        for stretch in _stretches(rows):
            gpus_now = sum(r.gpus for r in stretch if r.covers(now))
            ends = [r.ends_at for r in stretch]
            result[team_id].append(
                {
                    "flavor": flavor,
                    "gpus_now": gpus_now,
                    "gpus_peak": capacity.peak(stretch, now, now + HORIZON),
                    "starts": min(r.starts_at for r in stretch),
                    "request_ids": sorted(r.pk for r in stretch),
                    "until": None if None in ends else max(ends),
                    "spend_per_day": gpus_now * flavor.price_per_gpu_hour * 24,
                    "shares_with": flavor.shares_resource_with(flavors.values()),
                }
            )
    return result


def _stretches(reservations):
    """Reservations split where time runs between one's end and the next's start."""
    stretches, end = [], None
    for r in sorted(reservations, key=lambda r: r.starts_at):
        if stretches and (end is None or r.starts_at <= end):
            stretches[-1].append(r)
            end = None if end is None or r.ends_at is None else max(end, r.ends_at)
        else:
            stretches.append([r])
            end = r.ends_at
    return stretches


def _cluster_state(team, quota_rows, extra, now):
    """What the usage table says of each resource: the quota approved, the part
    batch jobs borrow for their window, and whether the cluster has caught up.

    The inventory reads the namespace every PORTAL_INVENTORY_INTERVAL seconds;
    figures three intervals old are stale and the page says so.
    """
    approved = defaultdict(int)
    for row in quota_rows:
        approved[row["flavor"].resource_name] += row["gpus_now"]
    stale_after = timedelta(seconds=3 * settings.PORTAL_INVENTORY_INTERVAL)
    states = []
    for usage in team.quota_usage.all():
        lent = extra.get(usage.resource_name, 0)
        expected = approved.get(usage.resource_name, 0) + lent
        states.append(
            {
                "usage": usage,
                "lent": lent,
                "expected": expected,
                "on_its_way": usage.hard < expected,
                "stale": now - usage.observed_at > stale_after,
            }
        )
    return states


# PostgreSQL: each team's latest decisions on requests, read newest first from the
# partial index `audit_team_decisions` (team, subject type; whose condition this
# repeats) and stopped at the limit: the query reads what the page shows, however
# long the history.
_LATEST_DECISIONS = f"""
    SELECT latest.id FROM unnest(%s) AS teams(id) CROSS JOIN LATERAL (
        SELECT event.id FROM {AuditEvent._meta.db_table} event
        WHERE event.team_id = teams.id
            AND event.subject_type_id = %s AND event.actor_id IS NOT NULL
            AND NOT (event.action = '{QuotaAction.SUBMIT}')
        ORDER BY event.created_at DESC, event.id DESC LIMIT %s
    ) latest
"""


def _recent_events(team_ids, per_team=10):
    """The last `per_team` decisions people made on each team's requests, in one
    query, and their requests (`event.subject`, with its flavor) in one more.

    Decisions by people: system transitions (activation, expiry) show as the
    request's current status beside the decision, and a submission is no decision.
    Team-level events (archive, sync_failed, drift_repaired) have no request to link to.
    """
    if not team_ids:
        return AuditEvent.objects.none()
    request_type = ContentType.objects.get_for_model(QuotaRequest)  # cached after the first
    newest_first = [F("created_at").desc(), F("pk").desc()]
    if connection.vendor == "postgresql":
        latest = AuditEvent.objects.filter(
            pk__in=RawSQL(_LATEST_DECISIONS, (list(team_ids), request_type.pk, per_team))
        )
    else:
        # No unnest or LATERAL (SQLite, the zero-setup default): the same decisions
        # ranked by a window function, which reads the teams' whole history.
        latest = (
            AuditEvent.objects.filter(
                team_id__in=team_ids, subject_type=request_type, actor__isnull=False
            )
            .exclude(action=QuotaAction.SUBMIT)
            .annotate(rank=Window(RowNumber(), partition_by=[F("team_id")], order_by=newest_first))
            .filter(rank__lte=per_team)
        )
    requests = GenericPrefetch("subject", [QuotaRequest.objects.select_related("flavor")])
    return latest.select_related("actor").prefetch_related(requests).order_by(*newest_first)


# Request list

LIST_PAGE_SIZE = 25


@login_required
def request_list(request):
    """Every request the user may see, filtered, sorted and paged by the address's
    query string (bookmarkable, no JavaScript needed). Six queries: session, user,
    the filter's team and flavor choices, the count and the page."""
    teams = access.teams_for(request.user).values_list("slug", "name")
    flavors = Flavor.objects.values_list("slug", "name")
    form = RequestFilter(request.GET, teams=list(teams), flavors=list(flavors))
    if form.is_valid():
        requests = form.apply(_visible_requests(request.user))
        page = Paginator(requests, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    else:
        page = Paginator(QuotaRequest.objects.none(), LIST_PAGE_SIZE).get_page(1)
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "unsorted": unsorted.urlencode(),
        "sort": form.cleaned_data.get("sort") if form.is_valid() else "",
    }
    return render(request, "gpu_requests/request_list.html", context)


# Reservation timeline

TIMELINE_DAYS = 28


@login_required
def timeline_page(request):
    flavors = list(Flavor.objects.filter(is_active=True))
    chosen = next((f for f in flavors if f.slug == request.GET.get("flavor")), None)
    context = {
        "flavors": [(f.slug, f.name) for f in flavors],
        "chart": _timeline_chart(request.user, chosen or (flavors[0] if flavors else None)),
        "reviewer": access.can_review(request.user),
    }
    return render(request, "gpu_requests/timeline.html", context)


def _timeline_chart(user, flavor):
    """The Gantt chart of `flavor` for the next four weeks: every team's bars for
    reviewers, the user's teams' for members (all teams count in the line).
    Four queries, and one per registered reservation source."""
    if flavor is None:
        return None
    starts_at = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    ends_at = starts_at + timedelta(days=TIMELINE_DAYS)
    held = capacity.all_reservations([flavor.pk], starts_at, ends_at)
    team_ids = {r.team_id for r in held if r.team_id is not None}
    names = dict(access.teams_for(user).filter(pk__in=team_ids).values_list("pk", "name"))
    pending = (
        _visible_requests(user)
        .filter(flavor=flavor, status=Status.PENDING)
        .overlapping(starts_at, ends_at)
        .order_by("starts_at", "pk")[:100]
    )

    def label_of(r):
        if isinstance(r, QuotaRequest):
            return f"{r.team.name} · {r.gpus} GPUs · #{r.pk}"
        if r.source != "quota":
            # Batch windows are no team's: everyone sees them, by name.
            return f"{r.name or r.source.capitalize()} ({r.source}) · {r.gpus} GPUs"
        return f"{names[r.team_id]} · {r.gpus} GPUs · #{r.pk}" if r.team_id in names else None

    def lane_of(r):
        # A recurring holder (a batch window) is one row, a segment per opening.
        return None if isinstance(r, QuotaRequest) or r.source == "quota" else (r.source, r.pk)

    def link_of(r):
        if isinstance(r, QuotaRequest) or r.source == "quota":
            return reverse("request_detail", args=[r.pk])
        return ""

    return timeline.chart(
        flavor,
        capacity_of(flavor),
        held,
        list(pending),
        starts_at,
        TIMELINE_DAYS,
        label_of=label_of,
        link_of=link_of,
        lane_of=lane_of,
    )


# New request


@login_required
def request_new(request):
    """The request form; `?follows=<pk>&kind=more_time|more_gpus` pre-fills a follow-up
    of approved or active quota. "Preview cost" re-renders it with the estimate, for
    browsers without JavaScript."""
    properties = FlavorPropertiesForm(request.POST or None)
    form = QuotaRequestForm(
        request.user,
        request.POST or None,
        initial=_follow_up_initial(request),
        flavors=properties.flavors(),
    )
    if request.method == "POST" and request.GET.get("validate"):
        return _validation_feedback(request, form, properties)
    if request.method == "POST" and "match" in request.POST:
        # "Show matching flavors" without JavaScript: the page as the live check sees it.
        _filled_in_errors(request, form)
        context = _form_context(form, properties)
        return render(request, "gpu_requests/request_new.html", context)
    if request.method == "POST" and "preview" in request.POST:
        form.is_valid()
        context = _form_context(form, properties, preview=True)
        return render(request, "gpu_requests/request_new.html", context)
    if request.method == "POST" and form.is_valid() and properties.is_valid():
        try:
            quota_request = actions.submit(by=request.user, **form.cleaned_data)
        except ValidationError as exc:
            # Someone changed the catalog or membership since clean(): same errors, same place.
            form.add_error(None, exc)
        else:
            messages.success(request, f"Request #{quota_request.pk} submitted for review.")
            return redirect("request_detail", pk=quota_request.pk)
    return render(request, "gpu_requests/request_new.html", _form_context(form, properties))


def _form_context(form, properties, **extra):
    """The form, its estimate and the flavors with the properties asked for, each
    with its price, the request's cost and what is free over its period."""
    typed = getattr(form, "cleaned_data", None) or form.initial or {}
    offers = flavor_offers(
        form.fields["flavor"].queryset.select_related("cluster"),
        gpus=typed.get("gpus"),
        starts_at=typed.get("starts_at"),
        ends_at=typed.get("ends_at"),
    )
    return {
        "form": form,
        "estimate": form.estimate(),
        "properties": properties,
        "offers": offers,
        "several_clusters": len({row["flavor"].cluster_id for row in offers}) > 1,
        "period_typed": bool(typed.get("starts_at")),
        "estimate_gpus": typed.get("gpus"),
        **extra,
    }


def _follow_up_initial(request):
    pk, kind = inputs.whole_number(request.GET.get("follows")), request.GET.get("kind", "")
    if request.method != "GET" or pk is None:
        return None
    if kind not in QuotaRequest.FollowKind.values:
        kind = QuotaRequest.FollowKind.MORE_GPUS
    follows = (
        _visible_requests(request.user).filter(pk=pk, status__in=QuotaRequest.RESERVING).first()
    )
    if follows is None:
        return None
    return QuotaRequestForm.follow_up_initial(follows, kind, timezone.now())


def _filled_in_errors(request, form):
    """Check the form, keeping errors only for fields the user has filled in so far."""
    form.is_valid()
    for name in list(form.errors):
        if name not in form.fields or not request.POST.get(name, "").strip():
            del form.errors[name]


def _validation_feedback(request, form, properties):
    """The live check. The flavor list is sent again only when the properties changed
    (the page says which it was made for), so a choice being made is not swapped away."""
    _filled_in_errors(request, form)
    properties.is_valid()
    context = _form_context(form, properties, live=True)
    context["new_choice"] = request.POST.get("matched_for") != properties.key()
    return render(request, "gpu_requests/request_new.html#feedback", context)


# Request detail and its actions


@login_required
def request_detail(request, pk):
    quota_request = _get_request_for_user(request.user, pk)
    return render(
        request, "gpu_requests/request_detail.html", _detail_context(request, quota_request)
    )


def _detail_context(request, quota_request, **extra):
    user = request.user
    pending = quota_request.status == Status.PENDING
    reviewer = access.can_review(user)
    member = access.can_see(user, quota_request.team)
    context = {
        "req": quota_request,
        "events": quota_request.events.select_related("actor"),
        "follow_ups": quota_request.follow_ups.order_by("pk"),
        "comments": quota_request.comments.select_related("author"),
        "can_comment": actions.can_comment(user, quota_request),
        "can_follow_up": member
        and quota_request.status in QuotaRequest.RESERVING
        and not quota_request.team.is_archived,
        "can_cancel": pending and actions.can_cancel(user, quota_request),
        "can_decide": pending and reviewer,
        "can_revoke": reviewer and quota_request.status in QuotaRequest.RESERVING,
        "can_end_early": quota_request.status == Status.ACTIVE
        and actions.can_end_early(user, quota_request),
        "capacity": capacity.capacity_view(quota_request) if reviewer and pending else None,
        "shares_with": quota_request.flavor.shares_resource_with(),
        **extra,
    }
    return context


def _act(request, pk, action):
    """Run one action on a request and answer with the queue row (htmx) or a redirect."""
    quota_request = _get_request_for_user(request.user, pk)
    try:
        actions.require(action, request.user, quota_request)
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    form = ReasonForm(request.POST)
    if not form.is_valid():
        level, text = messages.ERROR, " ".join(form.errors["reason"])
        if not request.htmx:
            # Refused, and the reason stays in the field to be shortened.
            context = _detail_context(
                request,
                quota_request,
                decision_reason=request.POST.get("reason", ""),
                decision_error=text,
            )
            return render(request, "gpu_requests/request_detail.html", context, status=400)
    else:
        try:
            getattr(actions, action)(
                quota_request, by=request.user, reason=form.cleaned_data["reason"]
            )
        except errors.NotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except errors.ActionError as exc:
            level, text = messages.ERROR, str(exc)
        else:
            level, text = (
                messages.SUCCESS,
                f"Request #{quota_request.pk} {AuditEvent.label_of(action).lower()}.",
            )
    if request.htmx:
        typed = request.POST.get("reason", "") if level == messages.ERROR else ""
        return _review_row_response(request, quota_request.pk, level, text, typed)
    messages.add_message(request, level, text)
    return HttpResponseRedirect(_next_url(request, quota_request))


@require_POST
@login_required
def request_comment(request, pk):
    quota_request = _get_request_for_user(request.user, pk)
    try:
        actions.comment(quota_request, by=request.user, body=request.POST.get("body", ""))
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except ValidationError as exc:
        # Refused: the page again with the comment as typed, the reason beside it.
        context = _detail_context(
            request,
            quota_request,
            comment_body=request.POST.get("body", ""),
            comment_error=" ".join(exc.messages),
        )
        return render(request, "gpu_requests/request_detail.html", context, status=400)
    # Shown in the comments card, where the page opens (#comments), not at its top.
    messages.success(
        request, "Comment added; the others in the thread are told by mail.", extra_tags="comments"
    )
    return redirect(reverse("request_detail", args=[quota_request.pk]) + "#comments")


def _next_url(request, quota_request):
    default = reverse("request_detail", args=[quota_request.pk])
    return inputs.same_site_path(request, request.POST.get("next"), default)


@login_required
def request_cancel(request, pk):
    if request.method != "POST":
        return _confirm(
            request,
            pk,
            title="Cancel request #{pk}?",
            explanation="It leaves the review queue; ask again with a new request.",
            button="Cancel request",
        )
    return _act(request, pk, "cancel")


def _confirm(request, pk, *, title, explanation, button, reason=None):
    """A destructive action's confirmation page, the same everywhere (templates/confirm.html)."""
    quota_request = _get_request_for_user(request.user, pk)
    context = {
        "title": title.format(pk=pk),
        "explanation": explanation,
        "button": button,
        "reason": reason,
        "back": reverse("request_detail", args=[quota_request.pk]),
    }
    return render(request, "confirm.html", context)


@require_POST
@login_required
def request_approve(request, pk):
    return _act(request, pk, "approve")


@require_POST
@login_required
def request_reject(request, pk):
    return _act(request, pk, "reject")


@login_required
def request_revoke(request, pk):
    if request.method != "POST":
        _require_reviewer(request.user)
        return _confirm(
            request,
            pk,
            title="Revoke request #{pk}'s quota?",
            explanation="The team's quota on the cluster drops at once; running pods keep "
            "running, new ones over the quota are refused.",
            button="Revoke quota",
            reason="",
        )
    return _act(request, pk, "revoke")


@login_required
def request_end_early(request, pk):
    """GET: the confirmation page (from the request's page); POST: give the quota back
    (the Spend page's and the dashboard's button posts here at once, with `next`)."""
    if request.method != "POST":
        return _confirm(
            request,
            pk,
            title="End request #{pk}'s quota now?",
            explanation="The team gives it back: the quota on the cluster drops at once and "
            "the GPUs are free for others. Running pods keep running; new ones over the "
            "quota are refused. To hold it again, ask anew.",
            button="End quota now",
            reason="",
        )
    return _act(request, pk, "end_early")


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
    flavors = list(Flavor.objects.filter(is_active=True))
    context = {
        "rows": rows,
        "page": page,
        "pending_count": page.paginator.count,
        **_upcoming(flavors),
        **_queue_timeline(request, flavors, rows[0]["req"].flavor if rows else None),
    }
    return render(request, "gpu_requests/review_queue.html", context)


def _queue_timeline(request, flavors, default=None):
    """The timeline beside the queue: the flavor asked for (?timeline=), else `default`
    (the first row's), else the first of `flavors`."""
    wanted = request.GET.get("timeline")
    flavor = next((f for f in flavors if f.slug == wanted), default)
    if flavor is None and flavors:
        flavor = flavors[0]
    return {
        "timeline_flavors": [(f.slug, f.name) for f in flavors],
        "chart": _timeline_chart(request.user, flavor),
    }


def _upcoming(flavors):
    """Peak reserved GPUs per UTC day for the next 30 days, per active flavor in `flavors`
    (one query, and one per registered reservation source)."""
    today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    outlook = capacity.daily_peaks(flavors, today, days=HORIZON.days)
    for row in outlook:
        row["shares_with"] = row["flavor"].shares_resource_with(flavors)
    return {
        "upcoming": outlook,
        "horizon_days": HORIZON.days,
    }


def _shown_ids(request):
    """The request ids of the queue page the decision was made on (its `shown` field)."""
    parts = request.POST.get("shown", "").split(",")[: QUEUE_PAGE_SIZE * 2]
    return {pk for pk in map(inputs.whole_number, parts) if pk is not None}


def _review_row_response(request, pk, level, text, reason=""):
    """The decided row, and out of band whatever else on the page it changed: the
    pending count and, after an approval, the capacity cells of the page's rows
    whose figures moved and the upcoming-capacity table. One response."""
    quota_request = _get_request_for_user(request.user, pk)
    row = {
        "req": quota_request,
        "message": text,
        "level": messages.DEFAULT_TAGS[level],
        "reason": reason,
    }
    context = {"row": row, "oob": True, "changed": []}
    if access.can_review(request.user):
        row["capacity"] = capacity.capacity_view(quota_request)
        context["pending_count"] = QuotaRequest.objects.filter(status=Status.PENDING).count()
        approved = quota_request.status in QuotaRequest.RESERVING and level == messages.SUCCESS
        if approved:
            context["changed"] = _changed_cells(quota_request, _shown_ids(request))
            flavors = list(Flavor.objects.filter(is_active=True))
            context.update(_upcoming(flavors))
            context.update(_queue_timeline(request, flavors, quota_request.flavor))
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
