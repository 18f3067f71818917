"""What the showback pages and the CSV exports show, in a fixed number of queries."""

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Max, Q
from django.db.models.functions import ExtractDay, ExtractHour
from django.utils import timezone

from billing import charts, metering, prometheus, queries
from billing.metering import histogram_percentile, merge_histograms
from billing.models import MIG_PROFILE, Budget, IngestedHour, TeamUsage, WorkloadUsage
from billing.rates import RateCard
from gpu_requests import inputs
from gpu_requests.models import Flavor, Team

CENT = Decimal("0.01")
TOP_IDLE = 10


@dataclass
class Month:
    start: datetime
    end: datetime

    @classmethod
    def parse(cls, raw, now=None):
        """The month named `YYYY-MM`, or the current one; ValueError if malformed."""
        now = now or timezone.now()
        if raw:
            year, _, month = str(raw).partition("-")
            year = inputs.whole_number(year, minimum=2000, maximum=2200)
            month = inputs.whole_number(month, minimum=1, maximum=12)
            if year is None or month is None:
                raise ValueError("Give the month as YYYY-MM, e.g. 2027-01.")
        else:
            year, month = now.year, now.month
        start = datetime(year, month, 1, tzinfo=UTC)
        days = calendar.monthrange(year, month)[1]
        return cls(start, start + timedelta(days=days))

    @property
    def label(self):
        return f"{self.start:%Y-%m}"

    @property
    def previous(self):
        return f"{self.start - timedelta(days=1):%Y-%m}"

    @property
    def next(self):
        return f"{self.end:%Y-%m}"

    @property
    def hours(self):
        return int((self.end - self.start).total_seconds() // 3600)


def forecast(spent, month, through):
    """Spend to the month's end at the pace so far (`through`: end of the last metered hour)."""
    elapsed = (min(through, month.end) - month.start).total_seconds() / 3600 if through else 0
    if elapsed <= 0:
        return None
    return (Decimal(spent) * Decimal(month.hours) / Decimal(elapsed)).quantize(CENT, ROUND_HALF_UP)


def metered_through(month):
    """End of the newest ingested hour within the month, or None (one query)."""
    newest = (
        IngestedHour.objects.filter(
            status=IngestedHour.Status.DONE, hour__gte=month.start, hour__lt=month.end
        )
        .order_by("-hour")
        .values_list("hour", flat=True)
        .first()
    )
    return newest + timedelta(hours=1) if newest else None


def _sum(rows, key):
    return sum((row[key] for row in rows), Decimal(0))


def team_figures(team, month):
    """The team page's figures (six queries; no chart geometry)."""
    rows = TeamUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
    by_flavor = list(queries.team_usage(rows, "flavor"))
    totals = {key: _sum(by_flavor, key) for key in queries.COLUMNS}
    through = metered_through(month)
    budget = Budget.objects.filter(team=team).first()
    idle = list(
        queries.workload_usage(
            WorkloadUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
        )[:TOP_IDLE]
    )
    return {
        "month": month,
        "by_flavor": by_flavor,
        "totals": totals,
        "forecast": forecast(totals["cost"], month, through),
        "through": through,
        "daily": list(queries.team_usage(rows, "day")),
        "budget": budget,
        "budget_state": budget_state(totals["cost"], budget and budget.monthly_amount),
        "top_idle": idle,
        "activity": workload_activity(team, month, idle[:5]),
    }


def team_report(team, month):
    """The team page: its figures, and the geometry of its charts."""
    report = team_figures(team, month)
    for row in report["daily"]:
        row["label"] = f"{row['day']:%d}"
    report["daily_chart"] = charts.stacked_bars(report["daily"], "label")
    report["burn_chart"] = _burn_down(report["daily"], month, report["budget"], report["forecast"])
    report["utilisation"] = activity_charts(month, report["activity"])
    return report


def budget_state(spent, amount):
    """How far a month's spend is into a budget `amount` (None: no budget)."""
    if amount is None:
        return None
    percent = (Decimal(spent) * 100 / amount).quantize(Decimal(1))
    if percent >= 100:
        word = "over budget"
    elif percent >= 80:
        word = "at 80 %"
    elif percent >= 50:
        word = "at 50 %"
    else:
        word = "within budget"
    return {"percent": percent, "word": word, "left": amount - Decimal(spent)}


def _burn_down(daily, month, budget, forecast_total):
    """Cumulative spend per day against the budget line, and the pace to the month's end."""
    days = [f"{day:02d}" for day in range(1, month.hours // 24 + 1)]
    spent_by_day = {row["label"]: row["cost"] for row in daily}
    cumulative, running = [], Decimal(0)
    last = max(spent_by_day, default=None)
    for label in days:
        running += spent_by_day.get(label, 0)
        cumulative.append(running if last and label <= last else None)
    lines = [{"label": "Spent so far", "values": cumulative}]
    peak = max([v for v in cumulative if v is not None], default=0)
    if forecast_total is not None and last:
        start, spent = days.index(last), cumulative[days.index(last)]
        step = (forecast_total - spent) / max(len(days) - 1 - start, 1)
        pace = [None] * start + [spent + step * i for i in range(len(days) - start)]
        lines.append({"label": "Forecast at this pace", "values": pace, "dash": "2 3"})
        peak = max(peak, forecast_total)
    if budget is not None:
        lines.append(
            {"label": "Budget", "values": [budget.monthly_amount] * len(days), "dash": "6 4"}
        )
        peak = max(peak, budget.monthly_amount)
    return charts.line_chart(days, lines, settings.PORTAL_CURRENCY, charts.nice_max(peak))


def workload_activity(team, month, workloads):
    """{(namespace, kind, name): [hourly mean engine activity in % or None]} over
    the month for each of `workloads` (one query)."""
    if not workloads:
        return {}
    match = Q()
    for load in workloads:
        match |= Q(namespace=load["namespace"], kind=load["kind"], name=load["name"])
    # Day and hour as integers from the database: cheaper to load than datetimes.
    points = (
        WorkloadUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
        .filter(match)
        .annotate(day=ExtractDay("hour", tzinfo=UTC), hour_of_day=ExtractHour("hour", tzinfo=UTC))
        .values_list("namespace", "kind", "name", "day", "hour_of_day", "activity_mean")
    )
    series = {
        (load["namespace"], load["kind"], load["name"]): [None] * month.hours for load in workloads
    }
    for namespace, kind, name, day, hour_of_day, activity in points:
        if activity is not None:
            series[(namespace, kind, name)][(day - 1) * 24 + hour_of_day] = round(activity * 100, 1)
    return series


def activity_charts(month, activity):
    labels = [
        f"{day:02d}" if hour == 0 else ""
        for day in range(1, month.hours // 24 + 1)
        for hour in range(24)
    ]
    result = []
    for (namespace, kind, name), values in activity.items():
        chart = charts.line_chart(
            labels, [{"label": f"{kind} {name}", "values": values}], "% active", 100
        )
        chart.x_labels = [(x, label) for x, label in chart.x_labels if label]
        result.append(
            {
                "namespace": namespace,
                "kind": kind,
                "name": name,
                "chart": chart,
                "chart_id": f"util-{len(result)}",
            }
        )
    return result


# --- per-workload report card ---


def workload_card(team, namespace, kind, name):
    """A workload's whole life from the ledger: two queries (plus the rate card's two)."""
    rows = WorkloadUsage.objects.filter(team=team, namespace=namespace, kind=kind, name=name)
    by_flavor = list(
        rows.values("flavor_id", "flavor__name", "flavor__slug")
        .annotate(**queries.workload_figures())
        .order_by("flavor__name")
    )
    if not by_flavor:
        return None
    # One row per hour of the workload's life (at most a few thousand).
    lives = list(rows.values_list("hour", "activity_histogram", "activity_mean"))
    histogram = merge_histograms(bands for _, bands, _ in lives)
    activity_total = samples = 0.0
    for _, bands, mean in lives:
        count = sum((bands or {}).values())
        if mean is not None:
            activity_total += mean * count
            samples += count
    first = min(hour for hour, _, _ in lives)
    last = max(hour for hour, _, _ in lives)
    card = {
        "namespace": namespace,
        "kind": kind,
        "name": name,
        "by_flavor": by_flavor,
        "first": first,
        "last": last + timedelta(hours=1),
        "mean": activity_total / samples if samples else None,
        "p95": histogram_percentile(histogram, 0.95),
        "fb_peak_mib": max((r["fb_peak_mib"] or 0) for r in by_flavor) or None,
        "cost": sum((r["cost"] for r in by_flavor), Decimal(0)),
        "idle_cost": sum((r["idle_cost"] for r in by_flavor), Decimal(0)),
        "gpu_hours": sum((r["allocated_gpu_hours"] for r in by_flavor), Decimal(0)),
    }
    card["hint"] = right_sizing(card, RateCard(), timezone.now())
    return card


def recent_chart(namespace, kind, name, now):
    """The last 24 hours per minute from Prometheus: (chart, None) or (None, error)."""
    try:
        points = metering.recent_activity(namespace, kind, name, now)
    except prometheus.PrometheusError as exc:
        return None, str(exc)
    if not points:
        return None, "No samples for this workload in the last 24 hours."
    start = now - timedelta(hours=24)
    values = [None] * (24 * 60 + 1)
    for timestamp, value in points:
        values[int((timestamp - start.timestamp()) // 60)] = round(value * 100, 1)
    # Hours of the day in the viewer's zone (the chart's title names it).
    labels = [
        f"{timezone.localtime(start + timedelta(minutes=m)):%H:%M}" if m % 180 == 0 else ""
        for m in range(len(values))
    ]
    chart = charts.line_chart(
        labels, [{"label": "Engine activity", "values": values}], "% active", 100
    )
    chart.x_labels = [(x, label) for x, label in chart.x_labels if label]
    return chart, None


def right_sizing(card, rate_card, now):
    """The cheapest MIG slice that would have held the workload, and the saving.

    It fits when its memory holds the peak framebuffer with 10 % headroom and
    its share of the GPU (slices of 7) covers the p95 engine activity measured
    on the whole GPU. Otherwise, an idle-time hint when most of the time was idle.
    """
    main = max(card["by_flavor"], key=lambda r: r["allocated_gpu_hours"])
    flavor = rate_card.flavors[main["flavor_id"]]
    hours = main["allocated_gpu_hours"]
    if flavor.sharing == Flavor.Sharing.WHOLE and card["fb_peak_mib"] and card["p95"] is not None:
        candidates = []
        for other in rate_card.flavors.values():
            match = _mig_shape(other)
            if match is None or not other.is_active:
                continue
            slices, memory_gb = match
            fits_memory = memory_gb * 1024 >= card["fb_peak_mib"] * 1.1
            if fits_memory and slices / 7 >= card["p95"]:
                candidates.append((rate_card.price(other.pk, now), other))
        if candidates:
            price, best = min(candidates, key=lambda c: (c[0], c[1].name))
            would_cost = (price * hours).quantize(CENT, ROUND_HALF_UP)
            cost = Decimal(main["cost"]).quantize(CENT, ROUND_HALF_UP)
            if would_cost < cost:
                return {
                    "kind": "mig",
                    "flavor": best,
                    "would_cost": would_cost,
                    "cost": cost,
                    "saving": cost - would_cost,
                    "text": (
                        f"peak {card['fb_peak_mib'] / 1024:.0f} GB of {flavor.memory_gb} GB and "
                        f"{(card['mean'] or 0) * 100:.0f} % activity: a {best.name} slice "
                        f"would have cost {would_cost} {settings.PORTAL_CURRENCY} "
                        f"instead of {cost} {settings.PORTAL_CURRENCY}"
                    ),
                }
    idle = Decimal(main["idle_gpu_hours"])
    if hours and idle / hours >= Decimal("0.5"):
        saving = Decimal(card["idle_cost"]).quantize(CENT, ROUND_HALF_UP)
        return {
            "kind": "idle",
            "saving": saving,
            "text": (
                f"idle {idle / hours * 100:.0f} % of its GPU time: {saving} "
                f"{settings.PORTAL_CURRENCY} paid for GPUs doing nothing. Release them when "
                "the work pauses (or run it as a batch job)."
            ),
        }
    return None


def _mig_shape(flavor):
    match = MIG_PROFILE.search(flavor.resource_name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def idle_hint(team, flavor, now=None, days=30):
    """For the quota request form: the team's idle share of `flavor` lately (one query)."""
    now = now or timezone.now()
    figures = TeamUsage.objects.filter(
        team=team, flavor=flavor, hour__gte=now - timedelta(days=days)
    ).aggregate(**queries.team_figures())
    allocated = figures["allocated_gpu_hours"]
    reserved_idle = figures["reserved_unallocated_gpu_hours"]
    held = allocated + reserved_idle
    if not held:
        return None
    wasted = figures["idle_gpu_hours"] + reserved_idle
    share = wasted / held
    if share < Decimal("0.3"):
        return None
    return {
        "share": (share * 100).quantize(Decimal(1)),
        "idle_gpu_hours": figures["idle_gpu_hours"],
        "reserved_unallocated_gpu_hours": reserved_idle,
        "idle_cost": figures["idle_cost"],
        "days": days,
    }


# --- admin ---

TEAM_SORTS = {
    "team": "name",
    "spend": "cost",
    "active": "active_gpu_hours",
    "idle": "idle_gpu_hours",
    "idle_cost": "idle_cost",
    "reserved_unallocated": "reserved_unallocated_gpu_hours",
    "credit": "credit",
    "budget": "budget",
}


def admin_teams(month, sort="spend", descending=True):
    """Every team's month in one query, sorted by a column of TEAM_SORTS.

    Grouped from Team, so PostgreSQL groups by the team's primary key alone
    (the other columns depend on it) and hashes 200 groups instead of sorting
    the month's rows.
    """
    field = TEAM_SORTS.get(sort, "cost")
    order = f"-{field}" if descending else field
    return list(
        Team.objects.filter(usage__hour__gte=month.start, usage__hour__lt=month.end)
        .values("id", "slug", "name")
        .annotate(**queries.team_figures(prefix="usage__"), budget=Max("budget__monthly_amount"))
        .order_by(order, "name")
    )


def pending_hours(limit=48):
    rows = IngestedHour.objects.filter(status=IngestedHour.Status.PENDING).order_by("hour")
    return list(rows[:limit]), rows.count()


def utilisation_charts(month):
    """Per flavor: daily capacity, allocated and active GPU-hours as lines (one query)."""
    per_flavor = {}
    for row in queries.flavor_utilisation(month.start, month.end):
        per_flavor.setdefault(row["flavor__name"], []).append(row)
    result = []
    for name, rows in per_flavor.items():
        labels = [f"{row['day']:%d}" for row in rows]
        chart = charts.line_chart(
            labels,
            [
                {
                    "label": "Capacity",
                    "values": [r["capacity_gpu_hours"] for r in rows],
                    "dash": "2 3",
                },
                {
                    "label": "Allocated",
                    "values": [r["allocated_gpu_hours"] for r in rows],
                    "dash": "6 4",
                },
                {"label": "Active", "values": [r["active_gpu_hours"] for r in rows]},
            ],
            "GPU-hours",
        )
        result.append(
            {"name": name, "rows": rows, "chart": chart, "chart_id": f"flavor-{len(result)}"}
        )
    return result
