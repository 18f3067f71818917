"""Showback pages. Views parse input, call reports (reads) or actions (writes)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from billing import actions, exports, fleet, health, prometheus, queries, reports
from billing.forms import BudgetForm
from billing.models import Budget, WorkloadUsage
from cluster import clock
from gpu_requests import actions as quota_actions
from provisioning.manifests import BUDGET_QUOTA_NAME
from teams import access, errors, hooks
from teams.namespaces import namespace_of


def _team_for_user(user, slug):
    """The team if `user` is in it or reviews quota, else 404."""
    return get_object_or_404(access.teams_for(user).distinct(), slug=slug)


def _month(request):
    """(month shown, the current month when its first days were passed over)."""
    try:
        return reports.Month.opened(request.GET.get("month"))
    except ValueError as exc:
        raise Http404(str(exc)) from None


def _metering_status():
    """What the pages say about where the figures come from."""
    return {"configured": bool(settings.PORTAL_PROMETHEUS_URL), "on_hold": actions.on_hold()}


FIGURE_COLUMNS = queries.COLUMNS


def _export(rows, keys, filename):
    return exports.csv_response(filename, keys, ([row.get(key) for key in keys] for row in rows))


@login_required
def overview(request):
    if access.can_review(request.user):
        return redirect("billing_admin")
    team = access.teams_for(request.user).first()
    if team is None:
        raise Http404("You are in no team.")
    return redirect("billing_team", slug=team.slug)


@login_required
def team_page(request, slug):
    # One query: the team, and the others whose pages the viewer may switch to.
    teams = list(access.teams_for(request.user).distinct().order_by("name"))
    team = next((t for t in teams if t.slug == slug), None)
    if team is None:
        raise Http404("No such team.")
    month, passed_over = _month(request)
    view = "24h" if request.GET.get("view") == "24h" else "month"
    report = reports.team_report(team, month, view)
    table = request.GET.get("export")
    if table == "flavors":
        return _export(
            report["by_flavor"],
            ["flavor__slug", *FIGURE_COLUMNS],
            f"{slug}-{month.label}-flavors.csv",
        )
    if table == "days":
        return _export(report["daily"], ["day", *FIGURE_COLUMNS], f"{slug}-{month.label}-days.csv")
    if table == "workloads":
        keys = [
            "namespace",
            "kind",
            "name",
            "flavor__slug",
            "allocated_gpu_hours",
            "active_gpu_hours",
            "idle_gpu_hours",
            "unmetered_gpu_hours",
            "lost_gpu_hours",
            "idle_cost",
            "credit",
            "cost",
        ]
        # Every workload of the month, not the page's top ten.
        rows = WorkloadUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
        return _export(queries.workload_usage(rows), keys, f"{slug}-{month.label}-workloads.csv")
    reviewer = access.can_review(request.user)
    can_set_budget = access.can_manage(request.user, team)
    return render(
        request,
        "billing/team.html",
        {
            "team": team,
            "report": report,
            "month": month,
            "view": view,
            "step": settings.PORTAL_BILLING_STEP,
            "currency": settings.PORTAL_CURRENCY,
            "charge": settings.PORTAL_BILLING_CHARGE,
            "threshold": settings.PORTAL_BILLING_IDLE_THRESHOLD * 100,
            "metering": _metering_status(),
            "budget_form": BudgetForm(
                initial={
                    "monthly_amount": getattr(report["budget"], "monthly_amount", None),
                    "mode": getattr(report["budget"], "mode", Budget.Mode.SOFT),
                    "when_spent": getattr(
                        report["budget"], "when_spent", Budget.WhenSpent.STOP_RUNNING
                    ),
                }
            ),
            "can_set_budget": can_set_budget,
            "passed_over": passed_over,
            # Members of several teams switch between them; admins, who may see every
            # team, go through the all-teams page instead.
            "switch_teams": teams if len(teams) > 1 and not reviewer else [],
            "panels": hooks.spend_panels(team, month),
            "unused": _unused(
                reports.unused_quota(month, [team.pk]).get(team.pk), request.user, month
            ),
        },
    )


@login_required
@require_POST
def team_budget(request, slug):
    team = _team_for_user(request.user, slug)
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            actions.set_budget(
                team,
                form.cleaned_data["monthly_amount"],
                by=request.user,
                mode=form.cleaned_data["mode"] or Budget.Mode.SOFT,
                when_spent=form.cleaned_data["when_spent"] or None,
            )
        except errors.NotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, "Budget saved.")
    else:
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
    return redirect("billing_team", slug=team.slug)


@login_required
def workload_page(request, slug, namespace, kind, name):
    """A workload's report card. One the ledger has not metered yet (its first hour
    is still open) has a page too when something else knows it: a panel (an idle
    notice links here minutes after it started) or the last 24 hours."""
    team = _team_for_user(request.user, slug)
    card = reports.workload_card(team, namespace, kind, name)
    panels = hooks.workload_panels(team, namespace, kind, name, request.user)
    recent = reports.recent_strip(team, namespace, kind, name, timezone.now())
    if card is None and not panels and not recent.rows:
        raise Http404("No metered usage for this workload.")
    return render(
        request,
        "billing/workload.html",
        {
            "team": team,
            "workload": {"namespace": namespace, "kind": kind, "name": name},
            "card": card,
            "recent": recent,
            "currency": settings.PORTAL_CURRENCY,
            "panels": panels,
        },
    )


@login_required
def admin_page(request):
    if not access.can_review(request.user):
        raise PermissionDenied("Only platform admins see every team's spend.")
    month, passed_over = _month(request)
    # Who pays for idle GPUs first, unless asked otherwise.
    sort = request.GET.get("sort", "idle_cost")
    if sort not in reports.TEAM_SORTS:
        sort = "idle_cost"
    descending = request.GET.get("dir", "desc") != "asc"
    view = "24h" if request.GET.get("view") == "24h" else "month"
    teams = reports.admin_teams(month, sort, descending)
    totals = reports.queries.cluster_totals(month.start, month.end)
    utilisation = reports.utilisation_charts(month)
    table = request.GET.get("export")
    if table == "teams":
        keys = ["slug", *FIGURE_COLUMNS, "budget"]
        return _export(teams, keys, f"teams-{month.label}.csv")
    if table == "totals":
        lines = [(line, exports.figure(line, value)) for line, value in sorted(totals.items())]
        return exports.csv_response(f"cluster-{month.label}.csv", ["line", "value"], lines)
    if table == "flavors":
        rows = [row for flavor in utilisation for row in flavor["rows"]]
        keys = [
            "flavor__slug",
            "day",
            "capacity_gpu_hours",
            "allocated_gpu_hours",
            "active_gpu_hours",
        ]
        return _export(rows, keys, f"flavors-{month.label}.csv")
    pending, pending_count = reports.pending_hours()
    if table == "pending":
        rows = [(h.hour.isoformat(), h.attempts, h.last_error) for h in pending]
        return exports.csv_response("pending-hours.csv", ["hour", "attempts", "last_error"], rows)
    trends = reports.idle_trends(month)
    for row in teams:
        row["budget_state"] = reports.budget_state(row["cost"], row["budget"])
        row["trend"] = trends.get(row["id"])
    return render(
        request,
        "billing/admin.html",
        {
            "month": month,
            "teams": teams,
            # Teams holding quota they do not use, most unused cost first.
            "unused": sorted(
                reports.unused_quota(month).values(),
                key=lambda team: (-team["cost"], team["team"].name),
            ),
            "sort": sort,
            "descending": descending,
            "totals": totals,
            "utilisation": utilisation,
            "picture": reports.cluster_picture(month, view),
            "view": view,
            "resolution": reports.resolution(month.start, month.end),
            "pending": pending,
            "pending_count": pending_count,
            "passed_over": passed_over,
            "metering": _metering_status(),
            "charge": settings.PORTAL_BILLING_CHARGE,
            "currency": settings.PORTAL_CURRENCY,
            "columns": [
                ("team", "Team"),
                ("spend", "Spend"),
                ("active", "Active GPU-h"),
                ("idle", "Idle GPU-h"),
                ("idle_cost", "Idle cost"),
                ("trend", "Idle cost per day"),
                ("reserved_unallocated", "Reserved, unallocated GPU-h"),
                ("credit", "Credit (lost GPU time)"),
                ("budget", "Budget"),
            ],
        },
    )


@login_required
def fleet_page(request):
    """Where the GPU money went: a month of the fleet's cost in four parts."""
    if not access.can_review(request.user):
        raise PermissionDenied("Only platform admins see where the fleet's money went.")
    month, passed_over = _month(request)
    return render(
        request,
        "billing/fleet.html",
        {
            "month": month,
            "passed_over": passed_over,
            "fleet": fleet.page(month, fleet.months_before(month)),
            "metering": _metering_status(),
            "resolution": reports.resolution(month.start, month.end),
            "currency": settings.PORTAL_CURRENCY,
        },
    )


@login_required
def health_page(request):
    reviewer = access.can_review(request.user)
    error = None
    events = []
    days = health.span_days(request.GET.get("days"))
    try:
        events = health.xid_events(hours=days * 24, at=timezone.now())
    except prometheus.PrometheusError as exc:
        error = str(exc)
    if not reviewer:
        mine = set(actions.teams_by_namespace(access.teams_for(request.user)))
        for event in events:
            if event["namespace"] not in mine:
                event["namespace"] = event["pod"] = ""
    return render(
        request,
        "billing/health.html",
        {
            "events": events,
            "error": error,
            "metering": _metering_status(),
            "days": days,
            "within_minutes": health.first_seen_within(days * 24) // 60,
            "spans": [(span, "24 hours" if span == 1 else f"{span} days") for span in health.SPANS],
        },
    )


def _unused(unused, user, month):
    """The unused-quota note's context (`unused`: a team's of reports.unused_quota, or
    None): each active request marked with whether `user` may give it back (a query
    for each the user did not ask for, unless an admin)."""
    if unused is None:
        return None
    for row in unused["rows"]:
        for quota_request in row["requests"]:
            quota_request.may_end = quota_actions.can_end_early(user, quota_request)
    return {**unused, "month": month, "charge": settings.PORTAL_BILLING_CHARGE}


def unused_quota_notes(team_ids, user):
    """The dashboard's note on each team holding quota it does not use this month
    (registered with hooks.on_dashboard_note): two queries for all of them."""
    month, _ = reports.Month.opened(None)
    return {
        team_id: ("billing/_unused_quota.html", _unused(unused, user, month))
        for team_id, unused in reports.unused_quota(month, team_ids).items()
    }


def budget_panel(team):
    """The team page's note while a hard budget holds the team's GPU work (registered
    with hooks.on_team_panel): why, what is held, and when it lifts. One query, four
    more while held."""
    budget = Budget.objects.filter(team=team, mode=Budget.Mode.HARD, spent_at__isnull=False).first()
    if budget is None:
        return None
    now = clock.now()
    total = actions.running_totals([team.pk], now)[team.pk]
    return "billing/_budget_held.html", {
        "team": team,
        "budget": budget,
        "total": total,
        "namespace": namespace_of(team.slug),
        "quota_name": BUDGET_QUOTA_NAME,
        "stops_running": budget.when_spent == Budget.WhenSpent.STOP_RUNNING,
        "lifts_on": actions.next_month(budget.spent_at),
    }
