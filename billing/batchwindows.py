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
