"""The idle dashboard: who holds GPUs and does not use them.

A row per workload (Job, notebook, Deployment or bare pod), time across,
coloured by engine activity, sorted by idle cost: over a month from the
ledger (hourly), over the last 24 hours from Prometheus (per minute). And
"top idle workloads" with repeats grouped ("18 jobs train-0 ... train-17").
"""

import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from billing import charts, metering, prometheus
from billing.rates import RateCard

ROWS = 15  # workloads in the picture; the rest are in the tables and the CSV
TOP_GROUPS = 10


@dataclass
class Row:
    namespace: str
    kind: str
    name: str
    shape: str  # the flavor (a MIG slice is a flavor of its own)
    team_slug: str = ""
    team_name: str = ""
    gpus: int = 0
    held_gpu_hours: Decimal = Decimal(0)
    idle_gpu_hours: Decimal = Decimal(0)
    idle_cost: Decimal | None = None
    in_ledger: bool = True
    shape_slug: str = ""
    count: int = 1  # workloads folded into the row (train-0 ... train-17)
    last_name: str = ""  # of the folded ones; `name` is the first
    link_name: str = ""  # the report card the row links to: its most idle workload
    worst: tuple = (0, 0)  # (idle cost, idle GPU-hours) of that workload
    price: Decimal | None = None  # per GPU-hour, for the last 24 hours' idle cost
    slots: dict = field(default_factory=dict)  # index -> charts.Slot
    runs: list = field(default_factory=list)

    @property
    def label(self):
        if self.count == 1:
            return f"{self.kind} {self.name}"
        return f"{self.count} {_plural(self.kind, self.count)} {self.name} … {self.last_name}"

    @property
    def idle_share(self):
        return self.idle_gpu_hours / self.held_gpu_hours * 100 if self.held_gpu_hours else None


@dataclass
class Picture:
    """Rows of heat strips and their time axis."""

    rows: list
    ticks: list  # [(x %, label)]
    resolution: str  # "hour" or "minute"
    span: str  # what the axis covers, in words
    total: int  # workloads that held GPUs in the span (rows shows the first ROWS)
    error: str = ""
    rows_caption: str = "Rows: workloads, most idle cost first."

    @property
    def bands(self):
        return [
            {"label": label, "pattern": pattern, "colour": colour}
            for label, pattern, colour in charts.HEAT_BANDS.values()
        ]


def month_picture(rows, month, groups, label_of, threshold=None):
    """The month's strips of the first ROWS of `groups` (`group_repeats`, by idle
    cost) from WorkloadUsage `rows` (a queryset already limited to a team, or
    not): one query, whatever the number of hours."""
    threshold = threshold if threshold is not None else settings.PORTAL_BILLING_IDLE_THRESHOLD
    in_month = rows.filter(hour__gte=month.start, hour__lt=month.end)
    shown = groups[:ROWS]
    result = [_row(group) for group in shown]
    if shown:
        match = Q()
        by_key = {}
        for group, row in zip(shown, result, strict=True):
            names = [member["name"] for member in group["members"]]
            match |= Q(
                namespace=group["namespace"],
                kind=group["kind"],
                flavor__slug=group["flavor__slug"],
                name__in=names,
            )
            for name in names:
                by_key[(group["namespace"], group["kind"], name, group["flavor__slug"])] = row
        fields = (
            "namespace",
            "kind",
            "name",
            "flavor__slug",
            "hour",
            "gpus",
            "active_seconds",
            "idle_seconds",
            "unmetered_seconds",
            "activity_mean",
            "lost_idle_seconds",
        )
        # One row per workload-hour of the rows shown.
        for namespace, kind, name, slug, hour, *figures in in_month.filter(match).values_list(
            *fields
        ):
            index = int((hour - month.start).total_seconds() // 3600)
            row = by_key.get((namespace, kind, name, slug))
            if row is not None:  # a member of another team's group of the same name
                add_slot(row.slots, index, ledger_slot(*figures))
    hours = month.hours
    for row in result:
        row.runs = charts.heat_runs(
            row.slots,
            hours,
            lambda index: label_of(month.start + timedelta(hours=index)),
            threshold,
        )
    days = hours // 24
    every = 5 if days > 10 else 1
    ticks = anchored(
        [((day * 24) * 100 / hours, f"{day + 1}") for day in range(days) if day % every == 0]
    )
    return Picture(result, ticks, "hour", f"days of {month.start:%B %Y} (UTC)", len(groups))


def ledger_slot(gpus, active, idle, unmetered, activity, credited):
    """A slot of ledger figures: credited idle time is its own, never idle."""
    return charts.Slot(gpus, active, idle - credited, unmetered, activity, credited)


def add_slot(slots, index, slot):
    """Fold `slot` into slots[index]: GPUs and seconds add, activity is weighted."""
    held = slots.get(index)
    if held is None:
        slots[index] = slot
        return
    before, added = held.active + held.idle, slot.active + slot.idle
    if held.activity is None or slot.activity is None:
        held.activity = held.activity if slot.activity is None else slot.activity
    elif before + added:
        held.activity = (held.activity * before + slot.activity * added) / (before + added)
    held.gpus += slot.gpus
    held.active += slot.active
    held.idle += slot.idle
    held.unmetered += slot.unmetered
    held.credited += slot.credited


def _row(group):
    return Row(
        namespace=group["namespace"],
        kind=group["kind"],
        name=group.get("first_name", group["name"]),
        shape=group["flavor__name"],
        team_slug=group.get("team__slug", ""),
        team_name=group.get("team__name", ""),
        gpus=group["gpus"] or 0,
        held_gpu_hours=group["allocated_gpu_hours"],
        idle_gpu_hours=group["idle_gpu_hours"],
        idle_cost=group["idle_cost"],
        shape_slug=group["flavor__slug"],
        count=group["count"],
        last_name=group.get("last_name", ""),
        link_name=group["worst"]["name"],
    )


def recent_picture(teams_by_namespace, now, ledger_rows, label_of, threshold=None, only=None):
    """The last 24 hours per minute from Prometheus (two queries), for the
    namespaces of `teams_by_namespace` ({namespace: (slug, name)}). Each pod's
    shape and price come from the ledger (`ledger_rows`, WorkloadUsage of the
    same teams, one query); a workload too new for the ledger is named by the
    exporter's model label and its idle cost is left out. `only`, a
    (namespace, kind, name), keeps that workload's row alone (a report card)."""
    threshold = threshold if threshold is not None else settings.PORTAL_BILLING_IDLE_THRESHOLD
    start = now - timedelta(hours=24)
    try:
        pods = metering.recent_pods(list(teams_by_namespace), start, now)
    except prometheus.PrometheusError as exc:
        return Picture([], [], "minute", "the last 24 hours", 0, error=str(exc))
    known = {
        (namespace, kind, name): (flavor_id, flavor_name)
        for namespace, kind, name, flavor_id, flavor_name in ledger_rows.filter(
            hour__gte=start - timedelta(days=31)
        )
        .values_list("namespace", "kind", "name", "flavor_id", "flavor__name")
        .distinct()
    }
    card = RateCard() if pods else None
    rows = {}
    minutes = 24 * 60
    for pod in pods:
        key = (pod.namespace, pod.kind, pod.name)
        if only is not None and key != only:
            continue
        flavor_id, shape = known.get(key, (None, pod.model))
        row = rows.get(key)
        if row is None:
            slug, team_name = teams_by_namespace.get(pod.namespace, ("", ""))
            row = rows[key] = Row(
                pod.namespace,
                pod.kind,
                pod.name,
                shape,
                slug,
                team_name,
                in_ledger=bool(flavor_id),
                link_name=pod.name,
            )
            row.price = card.price(flavor_id, now) if flavor_id else None
        for timestamp, readings in pod.minutes.items():
            index = int((timestamp - start.timestamp()) // 60)
            if not 0 <= index < minutes:
                continue
            slot = row.slots.setdefault(index, charts.Slot())
            active = sum(r >= threshold for r in readings)
            previous = slot.active + slot.idle
            slot.activity = ((slot.activity or 0) * previous + sum(readings) * 60) / (
                previous + len(readings) * 60
            )
            slot.active += active * 60
            slot.idle += (len(readings) - active) * 60
            slot.gpus += len(readings)
    for row in rows.values():
        row.gpus = max((s.gpus for s in row.slots.values()), default=0)
        row.held_gpu_hours = Decimal(sum(s.active + s.idle for s in row.slots.values())) / 3600
        row.idle_gpu_hours = Decimal(sum(s.idle for s in row.slots.values())) / 3600
        if row.price is not None:
            row.idle_cost = row.idle_gpu_hours * row.price

    def label_of_minute(index):
        return label_of(start + timedelta(minutes=index))

    ranked = sorted(
        rows.values() if only is not None else _fold(rows.values()),
        key=lambda r: (-(r.idle_cost or 0), -r.idle_gpu_hours, r.namespace, r.kind, r.name),
    )
    for row in ranked[:ROWS]:
        row.runs = charts.heat_runs(row.slots, minutes, label_of_minute, threshold)
    ticks = anchored(
        [(m * 100 / minutes, label_of_minute(m)[-5:]) for m in range(0, minutes + 1, 180)]
    )
    return Picture(ranked[:ROWS], ticks, "minute", "the last 24 hours", len(ranked))


def _fold(rows):
    """Rows of one team, namespace, kind and shape whose names differ only by a
    trailing number folded into one (slots added), as `group_repeats` does."""
    folded = {}
    for row in sorted(rows, key=lambda r: (_number(r.name), r.name)):
        match = NUMBERED.match(row.name)
        stem = (match.group(1), True) if match else (row.name, False)
        key = (row.team_slug, row.namespace, row.kind, stem, row.shape)
        into = folded.get(key)
        row.link_name, row.worst = row.name, (row.idle_cost or 0, row.idle_gpu_hours)
        if into is None:
            folded[key] = row
            continue
        if row.worst > into.worst:
            into.link_name, into.worst, into.in_ledger = row.name, row.worst, row.in_ledger
        into.count += 1
        into.last_name = row.name
        into.gpus = max(into.gpus, row.gpus)
        into.held_gpu_hours += row.held_gpu_hours
        into.idle_gpu_hours += row.idle_gpu_hours
        if into.idle_cost is not None and row.idle_cost is not None:
            into.idle_cost += row.idle_cost
        for index, slot in row.slots.items():
            add_slot(into.slots, index, slot)
    return list(folded.values())


def anchored(ticks):
    """(x %, label, text-anchor, minor): the first label starts at the left edge, the
    last ends at the right; on a phone the minor ones (every other of more than six)
    give way, so the others never overprint each other."""
    many = len(ticks) > 6
    return [
        (x, label, "end" if x >= 99 else "start" if x <= 1 else "middle", many and i % 2 == 1)
        for i, (x, label) in enumerate(ticks)
    ]


# --- top idle workloads, repeats grouped ---

NUMBERED = re.compile(r"^(.*?)(\d+)$")


def top_idle(workloads, limit=TOP_GROUPS):
    return group_repeats(workloads)[:limit]


def group_repeats(workloads):
    """Workloads (queries.workload_usage rows) ranked by idle cost, those of one
    kind, flavor and GPU count whose names differ only by a trailing number
    (train-0 ... train-17) folded into one line with their sum."""
    groups = {}
    for load in workloads:
        match = NUMBERED.match(load["name"])
        stem = match.group(1) if match else load["name"]
        key = (
            load.get("team__slug", ""),
            load["namespace"],
            load["kind"],
            stem if match else load["name"],
            load["flavor__slug"],
            load["gpus"],
            bool(match),
        )
        group = groups.get(key)
        if group is None:
            group = groups[key] = {**load, "members": [], "numbers": []}
            for figure in ("idle_cost", "cost", "allocated_gpu_hours", "idle_gpu_hours"):
                group[figure] = Decimal(0)
        group["members"].append(load)
        if match:
            group["numbers"].append(int(match.group(2)))
        for figure in ("idle_cost", "cost", "allocated_gpu_hours", "idle_gpu_hours"):
            group[figure] += load[figure] or 0
    ranked = sorted(groups.values(), key=lambda g: (-g["idle_cost"], g["namespace"], g["name"]))
    for group in ranked:
        members = sorted(group["members"], key=lambda m: (-m["idle_cost"], m["name"]))
        group["count"] = len(members)
        group["worst"] = members[0]
        group["kind_plural"] = _plural(group["kind"], len(members))
        if len(members) > 1:
            ordered = sorted(members, key=lambda m: _number(m["name"]))
            group["first_name"], group["last_name"] = ordered[0]["name"], ordered[-1]["name"]
    return ranked


def _number(name):
    match = NUMBERED.match(name)
    return (int(match.group(2)), name) if match else (0, name)


def _plural(kind, count):
    word = kind.lower()
    return word if count == 1 else word + ("es" if word.endswith("s") else "s")


def label_in_zone(fmt):
    """A slot label in the viewer's zone (the page names the zone)."""
    return lambda moment: f"{timezone.localtime(moment):{fmt}}"
