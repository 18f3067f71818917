"""How many GPUs of a flavor are reserved when: one computation, many readers.

Reservations are intervals `[starts_at, ends_at)` holding some GPUs of a
flavor. Approved and active quota requests are the first kind; other apps
hold capacity too (batch windows set GPUs aside) and feed theirs in through
the registry below, so the approval check, the review queue and the
timelines all count the same things.

`Timeline` turns a flavor's reservations into a step function with one sort
of their boundaries; after that, the level at an instant is a bisection and
the peak over a period is a max over the steps inside it. Pages that show
hundreds of requests fetch the reservations that can matter once (one query
per source), build one timeline per flavor and ask it per row.

Registering another source (in the app's `AppConfig.ready()`):

    from gpu_requests import capacity
    capacity.register_reservations(batch_reservations)
    # batch_reservations(flavor_ids, starts_at, ends_at) -> [capacity.Reservation]

A source returns its reservations of those flavors meeting
`[starts_at, ends_at)` (never open-ended: `all_reservations` asks up to the
`horizon`), in a fixed number of queries, each naming its holder in `source`
(so its `pk` values need not differ from quota requests'); `team_id` may be None.
"""

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Max

from cluster.capacity import capacity_of
from gpu_requests.models import QuotaRequest


@dataclass(frozen=True)
class Reservation:
    pk: int
    flavor_id: int
    team_id: int | None
    starts_at: object
    ends_at: object  # None: open-ended
    gpus: int
    source: str = "quota"  # who holds it: "quota" for quota requests, else the source's name
    name: str = ""  # the holder's own name where the source has one (a batch window's)

    def covers(self, instant):
        return self.starts_at <= instant and (self.ends_at is None or instant < self.ends_at)


_sources = []


def register_reservations(source):
    """Count `source(flavor_ids, starts_at, ends_at)`'s reservations wherever capacity is."""
    if source not in _sources:  # ready() may run twice (tests, reloads)
        _sources.append(source)
    return source


def unregister_reservations(source):
    if source in _sources:
        _sources.remove(source)


def reserved_levels(flavor, now):
    """[(instant, GPUs reserved from it on)] of `flavor` from `now`: quota and every
    registered source, what cluster.capacity keeps capacity above. One query per source."""
    timeline = Timeline(all_reservations([flavor.pk], now, None))
    return [(now, timeline.at(now))] + [
        (instant, level)
        for instant, level in zip(timeline.instants, timeline.levels, strict=True)
        if instant > now
    ]


# Past the last start or end of any quota, the level of quota is constant and a
# weekly window's occurrences repeat (their offsets from UTC within a year): looking
# a year and a week further sees every level there will ever be.
REPEATS_WITHIN = timedelta(days=366 + 7)


def horizon(flavor_ids, starts_at, ends_at=None):
    """How far to look from `starts_at` (to `ends_at` if given) to see the busiest
    moment of these flavors, however far ahead quota was approved. One query."""
    boundaries = (
        QuotaRequest.objects.reserving()
        .filter(flavor_id__in=flavor_ids)
        .aggregate(last_start=Max("starts_at"), last_end=Max("ends_at"))
    )
    known = [starts_at, ends_at, boundaries["last_start"], boundaries["last_end"]]
    return max(t for t in known if t is not None) + REPEATS_WITHIN


def reservations(flavor_ids, starts_at, ends_at, *, team_ids=None):
    """Reserving quota requests of these flavors that meet [starts_at, ends_at). One query."""
    rows = QuotaRequest.objects.reserving().filter(flavor_id__in=flavor_ids)
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    rows = rows.overlapping(starts_at, ends_at).order_by()
    fields = ("pk", "flavor_id", "team_id", "starts_at", "ends_at", "gpus")
    return [Reservation(*values) for values in rows.values_list(*fields)]


def all_reservations(flavor_ids, starts_at, ends_at):
    """Quota requests and every registered source's reservations: what capacity must hold.
    Open-ended (`ends_at` None), the sources are asked up to the `horizon`."""
    flavor_ids = set(flavor_ids)
    held = reservations(flavor_ids, starts_at, ends_at)
    if _sources and ends_at is None:
        ends_at = horizon(flavor_ids, starts_at)
    for source in _sources:
        held.extend(source(flavor_ids, starts_at, ends_at))
    return held


def by_flavor(held):
    grouped = defaultdict(list)
    for reservation in held:
        grouped[reservation.flavor_id].append(reservation)
    return grouped


class Timeline:
    """GPUs reserved over time by `held` (one flavor's reservations): a step function.

    Built with one sort of the boundaries, O(n log n); `at` is a bisection
    and `peak` a bisection and a max over the steps inside the period.
    """

    def __init__(self, held):
        change = defaultdict(int)
        for r in held:
            change[r.starts_at] += r.gpus
            if r.ends_at is not None:
                change[r.ends_at] -= r.gpus
        self.instants = sorted(change)
        self.levels = []  # levels[i] holds on [instants[i], instants[i + 1])
        level = 0
        for instant in self.instants:
            level += change[instant]
            self.levels.append(level)

    def at(self, instant):
        i = bisect_right(self.instants, instant) - 1
        return self.levels[i] if i >= 0 else 0

    def peak(self, starts_at, ends_at):
        """Most GPUs reserved at any instant of [starts_at, ends_at) (ends_at None: open)."""
        first = bisect_right(self.instants, starts_at) - 1
        stop = len(self.instants) if ends_at is None else bisect_left(self.instants, ends_at)
        inside = self.levels[max(first, 0) : stop]
        before = [0] if first < 0 else []
        return max(inside + before or [0])

    def steps(self, starts_at, ends_at):
        """[(from, to, GPUs)] covering [starts_at, ends_at): the line a chart draws."""
        edges = [starts_at] + [t for t in self.instants if starts_at < t < ends_at] + [ends_at]
        return [(a, b, self.at(a)) for a, b in zip(edges, edges[1:], strict=False)]


def peak(held, starts_at, ends_at):
    """Most GPUs `held` reserves at any instant of [starts_at, ends_at)."""
    return Timeline(held).peak(starts_at, ends_at)


def peak_reserved(flavor, starts_at, ends_at, *, exclude=None):
    """Peak of every reservation of `flavor` (quota and registered sources) over the period,
    without the quota request `exclude`. One query per source."""
    held = all_reservations([flavor.pk], starts_at, ends_at)
    if exclude is not None:
        held = [r for r in held if not _is_request(r, exclude.pk)]
    return peak(held, starts_at, ends_at)


def free_over(flavors, starts_at, ends_at):
    """{flavor id: GPUs free at the busiest moment of [starts_at, ends_at)} (never below 0),
    for flavors a request could still choose from. One query per source."""
    flavors = list(flavors)
    grouped = by_flavor(all_reservations([f.pk for f in flavors], starts_at, ends_at))
    return {
        f.pk: max(capacity_of(f) - Timeline(grouped[f.pk]).peak(starts_at, ends_at), 0)
        for f in flavors
    }


def _is_request(reservation, pk):
    return reservation.source == "quota" and reservation.pk == pk


@dataclass(frozen=True)
class CapacityView:
    """What a reviewer needs to decide: reserved without and with a request."""

    peak: int
    gpus: int
    capacity: int

    @property
    def after(self):
        return self.peak + self.gpus

    @property
    def fits(self):
        return self.after <= self.capacity

    @property
    def peak_percent(self):
        return _percent(self.peak, self.capacity)

    @property
    def request_percent(self):
        # The bar is full at 100 %; the numbers beside it tell by how much it overflows.
        return min(_percent(self.gpus, self.capacity), 100 - self.peak_percent)


def _percent(part, whole):
    if whole <= 0:
        return 100
    return min(100, round(100 * part / whole))


def _span(quota_requests):
    starts_at = min(r.starts_at for r in quota_requests)
    ends = [r.ends_at for r in quota_requests]
    return starts_at, None if None in ends else max(ends)


def capacity_views(quota_requests, *, without=()):
    """{pk: CapacityView} for requests (with flavor loaded): one fetch of the
    reservations (a query per source) and one timeline per flavor.

    `without`: quota request pks to leave out of every row's figures (what a
    row looked like before they were approved).
    """
    quota_requests = list(quota_requests)
    if not quota_requests:
        return {}
    starts_at, ends_at = _span(quota_requests)
    held = all_reservations({r.flavor_id for r in quota_requests}, starts_at, ends_at)
    if without:
        held = [r for r in held if not (r.source == "quota" and r.pk in without)]
    grouped = by_flavor(held)
    timelines = {flavor_id: Timeline(rows) for flavor_id, rows in grouped.items()}
    empty = Timeline([])
    views = {}
    for req in quota_requests:
        if req.status in QuotaRequest.RESERVING:
            # Its own reservation is among the steps: leave it out for this row only.
            others = [r for r in grouped[req.flavor_id] if not _is_request(r, req.pk)]
            timeline = Timeline(others)
        else:
            timeline = timelines.get(req.flavor_id, empty)
        views[req.pk] = CapacityView(
            peak=timeline.peak(req.starts_at, req.ends_at),
            gpus=req.gpus,
            capacity=capacity_of(req.flavor),
        )
    return views


def capacity_view(quota_request):
    """The same for one request."""
    return capacity_views([quota_request])[quota_request.pk]


@dataclass(frozen=True)
class Day:
    starts_at: object
    reserved: int
    capacity: int

    @property
    def percent(self):
        return _percent(self.reserved, self.capacity)

    @property
    def over(self):
        return self.reserved > self.capacity


def daily_peaks(flavors, today, days=30):
    """[{flavor, capacity, days, peak}]: peak reserved GPUs per UTC day. A query per source."""
    flavors = list(flavors)
    horizon = today + timedelta(days=days)
    grouped = by_flavor(all_reservations([f.pk for f in flavors], today, horizon))
    outlook = []
    for flavor in flavors:
        timeline = Timeline(grouped[flavor.pk])
        capacity = capacity_of(flavor)
        starts = [today + timedelta(days=n) for n in range(days + 1)]
        per_day = [
            Day(starts_at=start, reserved=timeline.peak(start, end), capacity=capacity)
            for start, end in zip(starts, starts[1:], strict=False)
        ]
        outlook.append(
            {
                "flavor": flavor,
                "capacity": capacity,
                "days": per_day,
                "peak": max(day.reserved for day in per_day),
            }
        )
    return outlook
