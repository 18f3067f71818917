"""What the showback pages and the CSV exports show, in a fixed number of queries."""

import calendar
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Max, Min, OuterRef, Subquery
from django.db.models.functions import TruncDay
from django.utils import timezone

from billing import charts, idle, queries
from billing.metering import histogram_percentile, merge_histograms
from billing.models import (
    Budget,
    BudgetChange,
    IngestedHour,
    LostRun,
    TeamUsage,
    WorkloadUsage,
    idle_figure,
    mig_shape,
)
from billing.rates import RateCard
from cluster.models import Flavor
from gpu_requests.models import QuotaRequest
from teams import formats, inputs
from teams.formats import with_article
from teams.models import Team
from teams.namespaces import namespace_of

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

    @classmethod
    def opened(cls, raw, now=None):
        """(month shown, the current month if it was passed over): the month named, else
        the current one, or the previous one while the current is in its first
        FORECAST_FROM_HOURS (a way back to it is offered)."""
        now = now or timezone.now()
        if raw:
            return cls.parse(raw, now), None
        current = cls.parse(None, now)
        if now - current.start >= timedelta(hours=FORECAST_FROM_HOURS):
            return current, None
        return cls.parse(current.previous, now), current

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

    @property
    def current(self):
        return self.start <= timezone.now() < self.end

    @property
    def title(self):
        """ "Month to date" while it runs; a month past (or to come) by its name."""
        return "Month to date" if self.current else f"Month of {self.start:%B %Y}"

    def partial_day(self, through):
        """(index, words) of the day the metered hours end inside, if they end inside
        one of this month's days (today's, while it is metered hour by hour)."""
        if through is None or not self.start < through < self.end or through.hour == 0:
            return None
        return (through - self.start).days, f"{through.hour} of 24 hours metered"


# A month's first days are too few hours to tell its pace (a night of idle notebooks,
# a weekend): no forecast before this many are metered, and a Spend page opened
# without a month shows the previous one until then.
FORECAST_FROM_HOURS = 72


def forecast(spent, month, through):
    """Spend to the month's end at the pace so far (`through`: end of the last metered
    hour); None before FORECAST_FROM_HOURS of the month are metered, and for a month
    that is over (its spend is what it was)."""
    if not month.current:
        return None
    elapsed = (min(through, month.end) - month.start).total_seconds() / 3600 if through else 0
    if elapsed < FORECAST_FROM_HOURS:
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


def resolution(start, end):
    """In words, the sample steps the hours of [start, end) were metered at (one
    query): "every minute", or "every 30 minutes until 20 Nov 14:00, every
    minute since" when a coarser history was loaded first."""
    spans = list(
        IngestedHour.objects.filter(
            status=IngestedHour.Status.DONE, hour__gte=start, hour__lt=end, step__isnull=False
        )
        .values("step")
        .annotate(first=Min("hour"), last=Max("hour"))
        .order_by("first")
    )
    if not spans:
        return f"every {_step_words(settings.PORTAL_BILLING_STEP)}"
    parts = []
    for index, span in enumerate(spans):
        words = f"every {_step_words(span['step'])}"
        if index + 1 < len(spans):
            until = timezone.localtime(span["last"] + timedelta(hours=1))
            words += f" until {until:%d %b %H:%M}"
        elif index:
            words += " since"
        parts.append(words)
    return ", ".join(parts)


def _step_words(step):
    if step % 60:
        return f"{step} seconds"
    return "minute" if step == 60 else f"{step // 60} minutes"


def _sum(rows, key):
    return sum((row[key] for row in rows), Decimal(0))


def team_figures(team, month):
    """The team page's figures (six queries; no chart geometry)."""
    rows = TeamUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
    by_flavor = list(queries.team_usage(rows, "flavor"))
    totals = {key: _sum(by_flavor, key) for key in queries.COLUMNS}
    through = metered_through(month)
    # The month's own budget; the Budget row (its mode, a hold) is this month's only.
    budget = Budget.objects.filter(team=team).first() if month.current else None
    budget_amount = BudgetChange.in_force(team.pk, month.end).first()
    # Every workload of the month, by idle cost: the picture's rows, the top
    # idle list (repeats grouped) and the CSV.
    workloads = list(
        queries.workload_usage(
            WorkloadUsage.objects.filter(team=team, hour__gte=month.start, hour__lt=month.end)
        )
    )
    return {
        "month": month,
        "by_flavor": by_flavor,
        "totals": totals,
        "forecast": forecast(totals["cost"], month, through),
        "through": through,
        "daily": list(queries.team_usage(rows, "day")),
        "budget": budget,
        "budget_amount": budget_amount,
        "budget_state": budget_state(totals["cost"], budget_amount),
        "workloads": workloads,
        "groups": idle.group_repeats(workloads),
        "resolution": resolution(month.start, month.end),
    }


def team_report(team, month, view="month", now=None):
    """The team page: its figures, and the geometry of its charts."""
    report = team_figures(team, month)
    for row in report["daily"]:
        row["label"] = f"{row['day']:%d}"
    report["daily_chart"] = charts.stacked_bars(
        _every_day(report["daily"], month),
        "date",
        x_name=f"Day of {month.start:%B %Y} (UTC)",
        partial=month.partial_day(report["through"]),
    )
    report["burn_chart"] = _burn_down(
        report["daily"], month, report["budget_amount"], report["forecast"]
    )
    ledger = WorkloadUsage.objects.filter(team=team)
    if view == "24h":
        namespace = namespace_of(team.slug)
        namespaces = {namespace: (team.slug, team.name)}
        report["picture"] = idle.recent_picture(
            namespaces, now or timezone.now(), ledger, idle.label_in_zone("%d %b %H:%M")
        )
    else:
        report["picture"] = idle.month_picture(
            ledger, month, report["groups"], idle.label_in_zone("%d %b %H:%M")
        )
    report["top_idle"] = report["groups"][: idle.TOP_GROUPS]
    return report


def _every_day(daily, month):
    """A row per day of `month` (days without figures empty), labelled with its date."""
    by_day = {row["day"]: row for row in daily}
    rows, day = [], month.start
    while day < month.end:
        rows.append({**by_day.get(day, {}), "date": f"{day:%-d %b}"})
        day += timedelta(days=1)
    return rows


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


def _burn_down(daily, month, budget_amount, forecast_total):
    """Cumulative spend per day against the budget line, and the pace to the month's end."""
    days = [f"{day:02d}" for day in range(1, month.hours // 24 + 1)]
    spent_by_day = {row["label"]: row["cost"] for row in daily}
    cumulative, running = [], Decimal(0)
    last = max(spent_by_day, default=None)
    for label in days:
        running += spent_by_day.get(label, 0)
        cumulative.append(running if last and label <= last else None)
    lines = [{"label": "Spent so far" if month.current else "Spent", "values": cumulative}]
    peak = max([v for v in cumulative if v is not None], default=0)
    if forecast_total is not None and last:
        start, spent = days.index(last), cumulative[days.index(last)]
        step = (forecast_total - spent) / max(len(days) - 1 - start, 1)
        pace = [None] * start + [spent + step * i for i in range(len(days) - start)]
        lines.append({"label": "Forecast at this pace", "values": pace, "dash": "2 3"})
        peak = max(peak, forecast_total)
    if budget_amount is not None:
        lines.append({"label": "Budget", "values": [budget_amount] * len(days), "dash": "6 4"})
        peak = max(peak, budget_amount)
    return charts.line_chart(
        days, lines, settings.PORTAL_CURRENCY, charts.nice_max(peak), show=formats.money
    )


# --- per-workload report card ---


def workload_card(team, namespace, kind, name):
    """A workload's whole life from the ledger: three queries (plus the rate card's two)."""
    rows = WorkloadUsage.objects.filter(team=team, namespace=namespace, kind=kind, name=name)
    by_flavor = list(
        rows.values("flavor_id", "flavor__name", "flavor__slug")
        .annotate(**queries.workload_figures())
        .order_by("flavor__name")
    )
    if not by_flavor:
        return None
    # One row per hour of the workload's life (at most a few thousand).
    lives = list(
        rows.values_list(
            "hour",
            "activity_histogram",
            "activity_mean",
            "gpus",
            "active_seconds",
            "idle_seconds",
            "unmetered_seconds",
            "lost_idle_seconds",
        )
    )
    histogram = merge_histograms(life[1] for life in lives)
    activity_total = samples = 0.0
    for _, bands, mean, *_ in lives:
        count = sum((bands or {}).values())
        if mean is not None:
            activity_total += mean * count
            samples += count
    first = min(life[0] for life in lives)
    last = max(life[0] for life in lives)
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
        "idle_gpu_hours": sum((r["idle_gpu_hours"] for r in by_flavor), Decimal(0)),
        "credit": sum((r["credit"] for r in by_flavor), Decimal(0)),
        "lost_gpu_hours": sum((r["lost_gpu_hours"] for r in by_flavor), Decimal(0)),
        "gpu_hours": sum((r["allocated_gpu_hours"] for r in by_flavor), Decimal(0)),
        "lost_to": [
            LOST_TO[cause]
            for cause in LostRun.objects.filter(
                team=team, namespace=namespace, kind=kind, name=name
            )
            .values_list("cause", flat=True)
            .distinct()
            .order_by("cause")
        ],
    }
    card["hint"] = right_sizing(card, RateCard(), timezone.now())
    card["verdict"] = verdict(card)
    card["run"] = _whole_run(card, lives)
    return card


LOST_TO = {LostRun.Cause.RECLAIM: "a spot reclaim", LostRun.Cause.XID: "an XID failure"}


def verdict(card):
    """What the card concludes, from its own figures: never "used what it held"
    while a tenth or more of the GPU time it paid for was idle, and never "paid
    for" time that was credited back."""
    credited = ""
    if card["lost_gpu_hours"]:
        causes = " and ".join(card["lost_to"])
        credited = (
            f"{formats.gpu_hours(card['lost_gpu_hours'])} GPU-hours lost to "
            f"{causes or 'a spot reclaim or an XID failure'}, credited "
            f"({formats.money(card['credit'])})."
        )
    # The GPU-hours it was charged for: the credited ones were given back.
    held = card["gpu_hours"] - card["lost_gpu_hours"]
    if not held:
        return credited
    idle_hours = card["idle_gpu_hours"]
    share = idle_hours / held * 100
    if share >= 10:
        paid = formats.gpu_hours(held)
        of = f"the {paid} GPU-hours it paid for" if credited else f"its {paid} GPU-hours"
        said = (
            f"Idle {formats.gpu_hours(idle_hours)} of {of} ({share:.0f} %): "
            f"{formats.money(card['idle_cost'])} paid for GPUs doing nothing."
        )
    elif card["hint"]:
        said = "Busy while it ran, but on a bigger shape than it needed."
    else:
        said = "Used what it held: busy while it ran, and no cheaper shape would have done."
    return f"{credited} {said}".strip()


def _whole_run(card, lives):
    """The workload's whole life as one heat strip, hour by hour from the ledger."""
    first = card["first"]
    count = int((card["last"] - first).total_seconds() // 3600)
    slots = {}
    for hour, _, mean, gpus, active, idle_seconds, unmetered, credited in lives:
        index = int((hour - first).total_seconds() // 3600)
        slot = idle.ledger_slot(gpus, active, idle_seconds, unmetered, mean, credited)
        idle.add_slot(slots, index, slot)
    row = idle.Row(
        card["namespace"],
        card["kind"],
        card["name"],
        ", ".join(r["flavor__name"] for r in card["by_flavor"]),
        gpus=max(r["gpus"] or 0 for r in card["by_flavor"]),
        held_gpu_hours=card["gpu_hours"],
        idle_gpu_hours=sum((r["idle_gpu_hours"] for r in card["by_flavor"]), Decimal(0)),
        idle_cost=card["idle_cost"],
        in_ledger=False,  # no link: this is its card
    )
    label_of = idle.label_in_zone("%d %b %H:%M")
    row.runs = charts.heat_runs(
        slots,
        count,
        lambda index: label_of(first + timedelta(hours=index)),
        settings.PORTAL_BILLING_IDLE_THRESHOLD,
    )
    days = max(count // 24, 1)
    every = max(1, -(-days // 4))  # four labels at most: they fit a phone
    ticks = [
        (index * 100 / count, label_of(first + timedelta(hours=index))[:6])
        for index in range(0, count, 24 * every)
    ]
    return idle.Picture([row], idle.anchored(ticks), "hour", "the whole run", 1, rows_caption="")


def recent_strip(team, namespace, kind, name, now):
    """The workload's last 24 hours per minute from Prometheus, as one strip
    (two queries to Prometheus, one to the ledger for its shape)."""
    picture = idle.recent_picture(
        {namespace: (team.slug, team.name)},
        now,
        WorkloadUsage.objects.filter(team=team),
        idle.label_in_zone("%d %b %H:%M"),
        only=(namespace, kind, name),
    )
    picture.rows_caption = ""
    for row in picture.rows:
        row.in_ledger = False  # no link: this is its card
    return picture


def right_sizing(card, rate_card, now):
    """The smallest MIG slice that would have held the workload, and the saving.

    It fits when its memory holds the peak framebuffer with 10 % headroom and
    its share of the GPU (slices of 7) covers the mean engine activity
    measured on the whole GPU (the work done); busy spells above its share
    (the p95) would have run slower, and the hint says so. Otherwise, an
    idle-time hint when a tenth or more of the time was idle.
    """
    main = max(card["by_flavor"], key=lambda r: r["allocated_gpu_hours"])
    flavor = rate_card.flavors[main["flavor_id"]]
    hours = main["allocated_gpu_hours"]
    currency = settings.PORTAL_CURRENCY
    mean = card["mean"]
    if flavor.sharing == Flavor.Sharing.WHOLE and card["fb_peak_mib"] and mean is not None:
        candidates = []
        for other in rate_card.flavors.values():
            shape = mig_shape(other)
            if shape is None or not other.is_active:
                continue
            slices, memory_gb = shape
            if memory_gb * 1024 >= card["fb_peak_mib"] * 1.1 and slices / 7 >= mean:
                candidates.append((shape, rate_card.price(other.pk, now), other))
        if candidates:
            (slices, _), price, best = min(candidates, key=lambda c: (c[0], c[1], c[2].name))
            would_cost = (price * hours).quantize(CENT, ROUND_HALF_UP)
            cost = Decimal(main["cost"]).quantize(CENT, ROUND_HALF_UP)
            if would_cost < cost:
                slower = ""
                if card["p95"] is not None and card["p95"] > slices / 7:
                    slower = (
                        f" (its busiest minutes, p95 {card['p95'] * 100:.0f} %, "
                        "would run slower there)"
                    )
                return {
                    "kind": "mig",
                    "flavor": best,
                    "would_cost": would_cost,
                    "cost": cost,
                    "saving": cost - would_cost,
                    "text": (
                        f"peak {card['fb_peak_mib'] / 1024:.0f} GB of {flavor.memory_gb} GB and "
                        f"{mean * 100:.0f} % mean activity on {with_article(flavor.name)}: "
                        f"{with_article(best.name)} slice would have held it{slower}, for "
                        f"{would_cost} {currency} instead of {cost} {currency}"
                    ),
                }
    idle_hours = Decimal(main["idle_gpu_hours"])
    if hours and idle_hours / hours >= Decimal("0.1"):
        saving = Decimal(card["idle_cost"]).quantize(CENT, ROUND_HALF_UP)
        return {
            "kind": "idle",
            "saving": saving,
            "text": (
                f"idle {idle_hours / hours * 100:.0f} % of its GPU time: {saving} "
                f"{currency} paid for GPUs doing nothing. Release them when "
                "the work pauses (or run it as a batch job)"
            ),
        }
    return None


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


def budget_hint(team, flavor, gpus, starts_at, ends_at, now=None):
    """For the quota request form: the team's budget, what is left of it this month,
    and what the request would cost within this month (its hours before the month
    ends; an open-ended one until then). None without a budget. Two queries."""
    budget = Budget.objects.filter(team=team).first()
    if budget is None:
        return None
    now = now or timezone.now()
    month = Month.parse(None, now)
    end = month.end
    spent = queries.spend_by_team(month.start, now).get(team.pk, Decimal(0))
    left = budget.monthly_amount - spent
    first, last = max(starts_at, now), min(ends_at or end, end)
    hours = max((last - first).total_seconds(), 0) / 3600
    this_month = (Decimal(gpus) * flavor.price_per_gpu_hour * Decimal(hours)).quantize(
        Decimal("0.01")
    )
    return {
        "budget": budget,
        "left": left,
        "this_month": this_month,
        "month_end": end,
        "over_by": max(this_month - left, Decimal(0)),
    }


# --- quota nobody uses ---


def unused_quota(month, team_ids=None):
    """{team id: {team, rows, cost}} of the teams holding active quota they left
    reserved but unallocated in `month`: a row per such flavor with the ledger's
    reserved and unallocated GPU-hours, what the unallocated ones cost, and the
    active requests to give back; `cost` their sum. `team_ids` None: every team.
    Two queries."""
    rows = TeamUsage.objects.filter(hour__gte=month.start, hour__lt=month.end)
    held = QuotaRequest.objects.filter(status=QuotaRequest.Status.ACTIVE)
    if team_ids is not None:
        rows, held = rows.filter(team_id__in=team_ids), held.filter(team_id__in=team_ids)
    figures = list(queries.unused_reservations(rows))
    held = held.filter(flavor_id__in={row["flavor_id"] for row in figures})
    active = defaultdict(list)
    for quota_request in held.select_related("team", "flavor", "requested_by").order_by("pk"):
        active[quota_request.team_id, quota_request.flavor_id].append(quota_request)
    unused = {}
    for row in figures:
        requests = active.get((row["team_id"], row["flavor_id"]))
        if requests:
            team = unused.setdefault(
                row["team_id"], {"team": requests[0].team, "rows": [], "cost": Decimal(0)}
            )
            team["rows"].append({**row, "requests": requests})
            team["cost"] += row["reserved_unallocated_cost"]
    return unused


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
        .annotate(
            **queries.team_figures(prefix="usage__"),
            budget=Subquery(BudgetChange.in_force(OuterRef("pk"), month.end)[:1]),
        )
        .order_by(order, "name")
    )


def idle_trends(month):
    """{team id: sparkline of its idle cost per day} over the month (one query)."""
    days = [month.start + timedelta(days=d) for d in range(month.hours // 24)]
    costs = defaultdict(dict)
    rows = (
        TeamUsage.objects.filter(hour__gte=month.start, hour__lt=month.end)
        .annotate(day=TruncDay("hour", tzinfo=UTC))
        .values("team_id", "day")
        .annotate(idle_cost=queries.cost_of(idle_figure()))
        .order_by()
    )
    for row in rows:
        costs[row["team_id"]][row["day"]] = row["idle_cost"]
    labels = [f"{day:%d %b}" for day in days]
    return {
        team_id: charts.sparkline([by_day.get(day, Decimal(0)) for day in days], labels, "money")
        for team_id, by_day in costs.items()
    }


def cluster_picture(month, view="month", now=None):
    """Every team's workloads as one picture, most idle cost first: the month
    from the ledger (two queries), or the last 24 hours from Prometheus (two
    queries there, two here)."""
    ledger = WorkloadUsage.objects.all()
    if view == "24h":
        namespaces = {
            namespace_of(slug): (slug, name)
            for slug, name in Team.objects.values_list("slug", "name")
        }
        return idle.recent_picture(
            namespaces, now or timezone.now(), ledger, idle.label_in_zone("%d %b %H:%M")
        )
    workloads = queries.workload_usage(
        ledger.filter(hour__gte=month.start, hour__lt=month.end), extra=("team__slug", "team__name")
    )
    return idle.month_picture(
        ledger, month, idle.group_repeats(workloads), idle.label_in_zone("%d %b %H:%M")
    )


def pending_hours(limit=48):
    rows = IngestedHour.objects.filter(status=IngestedHour.Status.PENDING).order_by("hour")
    return list(rows[:limit]), rows.count()


def utilisation_charts(month):
    """Per flavor: daily capacity, allocated and active GPU-hours as lines (one query)."""
    per_flavor = {}
    for row in queries.flavor_utilisation(month.start, month.end):
        per_flavor.setdefault(row["flavor__name"], []).append(row)
    partial = month.partial_day(metered_through(month))
    result = []
    for name, rows in per_flavor.items():
        labels = [f"{row['day']:%-d %b}" for row in rows]
        days = [(row["day"] - month.start).days for row in rows]
        # Today's day among the flavor's rows, if it has one.
        partial_here = (
            (days.index(partial[0]), partial[1]) if partial and partial[0] in days else None
        )
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
            x_name=f"Day of {month.start:%B %Y} (UTC)",
            partial=partial_here,
        )
        result.append(
            {"name": name, "rows": rows, "chart": chart, "chart_id": f"flavor-{len(result)}"}
        )
    return result
