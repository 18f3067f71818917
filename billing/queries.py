"""Ledger aggregates, computed by the database (one query each)."""

from datetime import UTC

from django.conf import settings
from django.db.models import ExpressionWrapper, F, FloatField, Max, OuterRef, Subquery, Sum
from django.db.models.functions import NullIf, TruncDay, TruncMonth

from billing.models import (
    FlavorHour,
    TeamUsage,
    allocated_cost,
    cost_expression,
    cost_of,
    hours,
    idle_figure,
)

OTHER_MODE = {"allocation": "reservation", "reservation": "allocation"}
# The figures the pages, exports and API show for a team's rows, in that order.
COLUMNS = (
    "allocated_gpu_hours",
    "active_gpu_hours",
    "idle_gpu_hours",
    "unmetered_gpu_hours",
    "reserved_unallocated_gpu_hours",
    "lost_gpu_hours",
    "idle_cost",
    "credit",
    "cost",
    "other_cost",
)


def team_figures(mode=None, prefix=""):
    """Annotations of TeamUsage rows: GPU-hours, the credit for lost GPU time,
    cost in the charging mode (less the credit), and the cost in the other
    mode (shown beside it). `prefix` reaches the
    rows through a relation ("usage__" from Team). Idle is idle less what was
    credited (`idle_figure`): a credited GPU-hour is credit, never idle cost."""
    mode = mode or settings.PORTAL_BILLING_CHARGE
    return {
        "allocated_gpu_hours": hours("allocated_seconds", prefix),
        "active_gpu_hours": hours("active_seconds", prefix),
        "idle_gpu_hours": hours(idle_figure(prefix)),
        "unmetered_gpu_hours": hours("unmetered_seconds", prefix),
        # Of allocated, attributed from DRA claims: the pages name the source.
        "dra_gpu_hours": hours("dra_seconds", prefix),
        "reserved_gpu_hours": hours("reserved_seconds", prefix),
        "reserved_unallocated_gpu_hours": hours("reserved_unallocated_seconds", prefix),
        "lost_gpu_hours": hours("lost_seconds", prefix),
        "idle_cost": cost_of(idle_figure(prefix), prefix),
        "credit": cost_of("lost_seconds", prefix),
        "cost": cost_expression(mode, prefix),
        "other_cost": cost_expression(OTHER_MODE[mode], prefix),
    }


def workload_figures():
    """Annotations of WorkloadUsage rows, the same figures as a team's (less
    reservations): summed over a team's workloads they are the team's
    allocation-mode figures."""
    return {
        "allocated_gpu_hours": hours("allocated_seconds"),
        "active_gpu_hours": hours("active_seconds"),
        "idle_gpu_hours": hours(idle_figure()),
        "unmetered_gpu_hours": hours("unmetered_seconds"),
        "dra_gpu_hours": hours("dra_seconds"),
        "lost_gpu_hours": hours("lost_seconds"),
        "idle_cost": cost_of(idle_figure()),
        "credit": cost_of("lost_seconds"),
        "cost": allocated_cost(),
        "gpus": Max("gpus"),
        "fb_peak_mib": Max("fb_peak_mib"),
        # Mean engine activity over the metered GPU-seconds.
        "activity": ExpressionWrapper(
            Sum(F("activity_mean") * (F("active_seconds") + F("idle_seconds")))
            / NullIf(Sum(F("active_seconds") + F("idle_seconds")), 0),
            output_field=FloatField(),
        ),
    }


GROUPS = {
    "team": ("team__slug", "team__name"),
    "flavor": ("flavor__slug", "flavor__name"),
    "day": ("day",),
}


def team_usage(rows, group_by, mode=None):
    """TeamUsage `rows` grouped by team, flavor or day (a values queryset)."""
    if group_by == "day":
        rows = rows.annotate(day=TruncDay("hour", tzinfo=UTC))
    return rows.values(*GROUPS[group_by]).annotate(**team_figures(mode)).order_by(*GROUPS[group_by])


def workload_usage(rows, extra=()):
    keys = (*extra, "namespace", "kind", "name", "flavor__slug", "flavor__name")
    return rows.values(*keys).annotate(**workload_figures()).order_by("-idle_cost", *keys)


def unused_reservations(rows):
    """TeamUsage `rows` per team and flavor whose quota was held and not allocated:
    reserved and reserved-but-unallocated GPU-hours, and what the unallocated ones
    cost at the ledger's prices (one query)."""
    return (
        rows.values("team_id", "flavor_id", "flavor__name")
        .annotate(
            reserved_gpu_hours=hours("reserved_seconds"),
            reserved_unallocated_gpu_hours=hours("reserved_unallocated_seconds"),
            reserved_unallocated_cost=cost_of("reserved_unallocated_seconds"),
        )
        .filter(reserved_unallocated_gpu_hours__gt=0)
        .order_by("flavor__name")
    )


def spend_by_team(start, end, mode=None):
    """{team id: cost} over [start, end)."""
    rows = (
        TeamUsage.objects.filter(hour__gte=start, hour__lt=end)
        .values("team_id")
        .annotate(cost=cost_expression(mode))
        .order_by()
    )
    return {row["team_id"]: row["cost"] for row in rows}


def cluster_totals(start, end):
    """The platform's account of every GPU-hour of capacity over [start, end)."""
    return FlavorHour.objects.filter(hour__gte=start, hour__lt=end).aggregate(
        capacity_gpu_hours=hours("capacity_seconds"),
        team_allocated_gpu_hours=hours("team_allocated_seconds"),
        team_reserved_unallocated_gpu_hours=hours("team_reserved_unallocated_seconds"),
        other_allocated_gpu_hours=hours("other_allocated_seconds"),
        batch_set_aside_unused_gpu_hours=hours("batch_set_aside_unused_seconds"),
        unreserved_gpu_hours=hours("unreserved_seconds"),
        active_gpu_hours=hours("active_seconds"),
        capacity_cost=cost_of("capacity_seconds"),
        team_allocated_cost=cost_of("team_allocated_seconds"),
        team_reserved_unallocated_cost=cost_of("team_reserved_unallocated_seconds"),
        other_allocated_cost=cost_of("other_allocated_seconds"),
        batch_set_aside_unused_cost=cost_of("batch_set_aside_unused_seconds"),
        unreserved_cost=cost_of("unreserved_seconds"),
    )


def flavor_utilisation(start, end):
    """Per flavor and day: capacity, allocated and active GPU-hours."""
    return (
        FlavorHour.objects.filter(hour__gte=start, hour__lt=end)
        .annotate(day=TruncDay("hour", tzinfo=UTC))
        .values("flavor__slug", "flavor__name", "day")
        .annotate(
            capacity_gpu_hours=hours("capacity_seconds"),
            allocated_gpu_hours=hours(F("team_allocated_seconds") + F("other_allocated_seconds")),
            active_gpu_hours=hours("active_seconds"),
        )
        .order_by("flavor__name", "day")
    )


# --- the fleet's cost in four parts (billing/fleet.py) ---

# part -> the FlavorHour seconds it counts. Unreserved is capacity less the other
# three (the ledger's unreserved and the batch set-aside nobody used): nobody held
# it and no team reserved it. Every part is priced at the flavor-hour's price, so
# the four add up to the capacity's cost in every row.
FLEET_SECONDS = {
    "fleet_cost": F("capacity_seconds"),
    "used": F("team_allocated_seconds"),
    "idle_reserved": F("team_reserved_unallocated_seconds"),
    "outside_teams": F("other_allocated_seconds"),
    "unreserved": F("unreserved_seconds") + F("batch_set_aside_unused_seconds"),
}


def _fleet_figures(seconds):
    figures = {}
    for part, column in seconds.items():
        figures[part] = cost_of(column)
        figures[f"{part}_gpu_hours"] = hours(column)
    return figures


def _by_month(rows, keys, by_month):
    if not by_month:
        return rows, keys
    return rows.annotate(month=TruncMonth("hour", tzinfo=UTC)), ("month", *keys)


def fleet_cost(start, end, by_month=False):
    """The fleet's cost and its four parts per flavor (and month) over [start,
    end), exact, not rounded (one query)."""
    rows, keys = _by_month(
        FlavorHour.objects.filter(hour__gte=start, hour__lt=end),
        ("flavor_id", "flavor__slug", "flavor__name"),
        by_month,
    )
    return rows.values(*keys).annotate(**_fleet_figures(FLEET_SECONDS)).order_by(*keys)


def fleet_cost_of_teams(start, end, by_month=False):
    """Each team's share of the fleet's `used` and `idle_reserved` per flavor over
    [start, end), exact, priced as the fleet's parts are: at the flavor-hour's
    price, not the team row's own (which carries its jobs' spot and off-peak
    factors). One query (the price a subquery per row)."""
    fleet_price = Subquery(
        FlavorHour.objects.filter(flavor=OuterRef("flavor"), hour=OuterRef("hour")).values("price")[
            :1
        ]
    )
    rows, keys = _by_month(
        TeamUsage.objects.filter(hour__gte=start, hour__lt=end).annotate(price_of_hour=fleet_price),
        ("flavor_id", "team__slug", "team__name"),
        by_month,
    )
    return (
        rows.values(*keys)
        .annotate(
            used=cost_of("allocated_seconds", price=F("price_of_hour")),
            used_gpu_hours=hours("allocated_seconds"),
            idle_reserved=cost_of("reserved_unallocated_seconds", price=F("price_of_hour")),
            idle_reserved_gpu_hours=hours("reserved_unallocated_seconds"),
        )
        .order_by(*keys)
    )
