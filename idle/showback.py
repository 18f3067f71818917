"""Showback of idle actions: GPU-hours given back and what they would have cost,
per team and month (docs/idle.md, "Formulas").

A row that gives GPUs back (scaled to zero, suspended) counts
`gpus x (ended_at or now - at)`; a report-only row ("would have acted") the
same, apart, as what acting would have saved. A row counts in the month its
action was taken, priced at the flavor's rate at that time.
"""

from collections import defaultdict
from decimal import Decimal

from django.utils import timezone

from billing.rates import RateCard
from idle.models import IdleAction

GIVEN = (IdleAction.Kind.SCALED_TO_ZERO, IdleAction.Kind.SUSPENDED)
WOULD = (IdleAction.Kind.WOULD_ACT,)


def _zero():
    return {
        "given_back_gpu_hours": Decimal(0),
        "saving": Decimal(0),
        "would_give_back_gpu_hours": Decimal(0),
        "would_save": Decimal(0),
    }


def by_team(team_ids, start, end, now):
    """{team id: figures} for actions taken in [start, end). One query (idle actions
    are a few a day, not a ledger), and the rate card's when there are any."""
    rows = IdleAction.objects.filter(
        team_id__in=team_ids, at__gte=start, at__lt=end, kind__in=GIVEN + WOULD
    ).only("team_id", "flavor_id", "kind", "at", "ended_at", "gpu_seconds", "gpus")
    hours = defaultdict(Decimal)  # (team, flavor, kind, at) -> GPU-hours
    for row in rows:
        hours[(row.team_id, row.flavor_id, row.kind, row.at)] += Decimal(str(row.gpu_hours(now)))
    figures = defaultdict(_zero)
    card = RateCard() if hours else None
    for (team_id, flavor_id, kind, at), gpu_hours in hours.items():
        price = card.price(flavor_id, at) or Decimal(0)
        team = figures[team_id]
        if kind in GIVEN:
            team["given_back_gpu_hours"] += gpu_hours
            team["saving"] += gpu_hours * price
        else:
            team["would_give_back_gpu_hours"] += gpu_hours
            team["would_save"] += gpu_hours * price
    return dict(figures)


def spend_panel(team, month):
    """hooks.on_spend_panel: the team's figures of the month on its Spend page."""
    figures = by_team([team.pk], month.start, month.end, timezone.now()).get(team.pk)
    if figures is None:
        return None
    return "idle/_spend_panel.html", figures
