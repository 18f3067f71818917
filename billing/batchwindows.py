"""What billing needs from the batch app, for one hour: the off-peak factor of
each batch Job that ran in a window, the GPU-seconds windows set aside, and
the pods batch saw lost to spot reclaims.

Billing reads batch, never the other way round (docs/architecture.md: apps on
top import each other one way only, and billing already prices batch windows).
A query or two each.
"""

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

from django.db.models import Q

from batch.models import BatchJob, BatchWindow
from teams.namespaces import namespace_of

HOUR = timedelta(hours=1)


def _overlap(start, end, hour):
    return max((min(end, hour + HOUR) - max(start, hour)).total_seconds(), 0)


def offpeak_factors(hour):
    """{(namespace, Job name): mean price factor over the hour} for batch Jobs
    planned into a window: the window's off-peak factor for the part of the
    hour inside their occurrence, 1 for the rest."""
    # No status filter: a Job only has GPU time in the ledger if it ran.
    jobs = BatchJob.objects.filter(
        window__isnull=False, opens_at__lt=hour + HOUR, closes_at__gt=hour
    ).values_list("pk", "team__slug", "opens_at", "closes_at", "window__price_factor")
    factors = {}
    for pk, slug, opens_at, closes_at, factor in jobs:
        share = Decimal(_overlap(opens_at, closes_at, hour)) / Decimal(3600)
        name = BatchJob(pk=pk).kubernetes_name
        factors[(namespace_of(slug), name)] = 1 - share * (1 - factor)
    return factors


def set_aside_seconds(hour):
    """{flavor id: GPU-seconds that enabled windows set aside during the hour}."""
    set_aside = defaultdict(int)
    windows = BatchWindow.objects.filter(enabled=True).prefetch_related("capacities")
    for window in windows:
        for occurrence in window.occurrences(hour, hour + HOUR):
            seconds = _overlap(occurrence.opens_at, occurrence.closes_at, hour)
            for capacity in window.capacities.all():
                set_aside[capacity.flavor_id] += int(seconds) * capacity.gpus
    return dict(set_aside)


def reclaimed_pods(hour):
    """Uids of batch pods lost to a spot reclaim (a DisruptionTarget condition:
    batch's watch records them, `BatchJob.disrupted_pods`), of the jobs that
    were not finished before the hour."""
    unfinished = Q(finished_at__isnull=True) | Q(finished_at__gte=hour)
    jobs = BatchJob.objects.filter(unfinished | ~Q(status__in=BatchJob.FINISHED))
    rows = jobs.filter(created_at__lt=hour + HOUR).values_list("disrupted_pods", flat=True)
    return frozenset(uid for uids in rows for uid in uids or ())


def batch_charges(team_ids, through, now):
    """{team id: (used, reserved)}: what the teams' batch jobs cost after `through`
    (the ledger's end: before it, the ledger holds their GPU time), as money. A job
    holds its reservation (`BatchJob.reserved_cost`: its GPUs for its whole
    deadline) from its release: while it runs, the part of it up to `now` is used
    and the rest reserved; once it ends, only what it used from its start to its
    end counts, and the rest is the team's again. One query."""
    jobs = BatchJob.objects.filter(
        team_id__in=team_ids,
        reserved_cost__isnull=False,
        released_at__isnull=False,
        deadline_seconds__gt=0,
    ).filter(Q(status__in=BatchJob.HOLDING) | Q(finished_at__gt=through))
    charges = {}
    fields = ("team_id", "status", "reserved_cost", "deadline_seconds", "released_at")
    for team_id, status, reserved, deadline, released, started, finished in jobs.values_list(
        *fields, "started_at", "finished_at"
    ):
        per_second = reserved / Decimal(deadline)
        end = released + timedelta(seconds=deadline)
        if status in BatchJob.HOLDING:
            begin = max(through, released)
            used = max((min(now, end) - begin).total_seconds(), 0)
            left = max((end - max(now, begin)).total_seconds(), 0)
        else:
            begin = max(through, started or released)
            used = max((min(finished, end) - begin).total_seconds(), 0)
            left = 0
        was = charges.get(team_id, (Decimal(0), Decimal(0)))
        charges[team_id] = (
            was[0] + per_second * Decimal(used),
            was[1] + per_second * Decimal(left),
        )
    return charges
