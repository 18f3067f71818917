"""Capacity figures for pages that show many requests at once.

`QuotaRequest.objects.peak_reserved()` answers for one period in two
queries. The review queue and the dashboard need it for every row, so they
fetch the reservations that can matter in one query and find each peak here,
with the same rule: reservations only rise where one starts, so a period's
peak is at its start or at the start of a reservation inside it.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from gpu_requests import actions
from gpu_requests.models import QuotaRequest


@dataclass(frozen=True)
class Reservation:
    pk: int
    flavor_id: int
    team_id: int
    starts_at: object
    ends_at: object  # None: open-ended
    gpus: int

    def covers(self, instant):
        return self.starts_at <= instant and (self.ends_at is None or instant < self.ends_at)


def reservations(flavor_ids, starts_at, ends_at, *, team_ids=None):
    """Reserving requests of these flavors that meet [starts_at, ends_at). One query."""
    rows = QuotaRequest.objects.reserving().filter(flavor_id__in=flavor_ids)
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    rows = rows.overlapping(starts_at, ends_at).order_by()
    fields = ("pk", "flavor_id", "team_id", "starts_at", "ends_at", "gpus")
    return [Reservation(*values) for values in rows.values_list(*fields)]


def peak(held, starts_at, ends_at):
    """Most GPUs `held` reserves at any instant of [starts_at, ends_at)."""
    instants = [starts_at] + [
        r.starts_at
        for r in held
        if r.starts_at > starts_at and (ends_at is None or r.starts_at < ends_at)
    ]
    return max(sum(r.gpus for r in held if r.covers(t)) for t in instants)


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


def capacity_views(quota_requests):
    """{pk: CapacityView} for requests (with flavor loaded). One query in all."""
    quota_requests = list(quota_requests)
    if not quota_requests:
        return {}
    starts_at = min(r.starts_at for r in quota_requests)
    ends = [r.ends_at for r in quota_requests]
    ends_at = None if None in ends else max(ends)
    by_flavor = defaultdict(list)
    flavor_ids = {r.flavor_id for r in quota_requests}
    for reservation in reservations(flavor_ids, starts_at, ends_at):
        by_flavor[reservation.flavor_id].append(reservation)
    views = {}
    for req in quota_requests:
        others = [r for r in by_flavor[req.flavor_id] if r.pk != req.pk]
        views[req.pk] = CapacityView(
            peak=peak(others, req.starts_at, req.ends_at),
            gpus=req.gpus,
            capacity=actions.capacity_of(req.flavor),
        )
    return views


def capacity_view(quota_request):
    """The same for one request, straight from the model's query (two queries)."""
    reserved = QuotaRequest.objects.peak_reserved(
        quota_request.flavor,
        quota_request.starts_at,
        quota_request.ends_at,
        exclude=quota_request,
    )
    return CapacityView(
        peak=reserved, gpus=quota_request.gpus, capacity=actions.capacity_of(quota_request.flavor)
    )


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
    """[{flavor, capacity, days, peak}]: peak reserved GPUs per UTC day. One query."""
    flavors = list(flavors)
    horizon = today + timedelta(days=days)
    by_flavor = defaultdict(list)
    for reservation in reservations([f.pk for f in flavors], today, horizon):
        by_flavor[reservation.flavor_id].append(reservation)
    outlook = []
    for flavor in flavors:
        held = by_flavor[flavor.pk]
        capacity = actions.capacity_of(flavor)
        starts = [today + timedelta(days=n) for n in range(days + 1)]
        per_day = [
            Day(starts_at=start, reserved=peak(held, start, end), capacity=capacity)
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
