"""A start estimate as a range: the planner's point estimate widened by how wrong
such estimates have been here.

The error of an estimate is the job's actual start (its pods running,
`started_at`) less the planner's first estimate of it (`BatchJob.first_eta`,
kept when the job is first planned). An estimate days away is wrong by more
than one due in minutes (work submitted meanwhile, work ending early), so
errors are measured in units of the lead they were made at, plus SCALE:
`error / (first_eta - submitted + SCALE)`. The range for a confidence c is

    point + (lead + SCALE) * [their (1 - c) / 2 quantile, their (1 + c) / 2 quantile]

with the lead of the point (point - now), over the jobs that started in the last
HISTORY_DAYS, the quantiles taken at the conservative ranks of split conformal
prediction (`bound`): if the next relative error is drawn like the past ones,
it falls inside with probability at least c. With fewer than MIN_SAMPLES
errors the range comes from PRIOR, measured on the demo's month (docs/batch.md).
`manage.py backtest_eta` replays a month through the planner and counts how
often actual starts fell inside.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from batch.models import BatchJob

# The share of actual starts the range is meant to hold.
CONFIDENCE = 0.8
HISTORY_DAYS = 30
# The newest errors read (one query, at most this many rows): a month of a busy
# installation's starts, and enough for any quantile a page shows.
MAX_SAMPLES = 2000
# Below this many errors a range at 80 % needs ranks past the last sample.
MIN_SAMPLES = 20
# The quantiles are taken this much past the confidence shown: errors are not
# exchangeable (a Monday burst's jobs move more than a quiet Wednesday's), and at
# the bare 80 % the held-out month held 74-78 % on some seeds (docs/batch.md).
MARGIN = 0.06
# Added to every lead: a job due now still waits for the tick and its pods.
SCALE = 3600.0
# With no history yet, relative errors (docs/batch.md: the demo's month).
PRIOR = (-1.0, 1.0)


@dataclass(frozen=True)
class Range:
    starts_from: datetime
    starts_to: datetime
    confidence: float
    samples: int  # errors it was calibrated on; 0: the prior


def bound(errors, confidence):
    """(low, high) seconds from sorted `errors` at `confidence`, or None with too few.

    Split conformal ranks: the k-th smallest with k = ceil((n + 1) * (1 + c) / 2)
    for the high end, and its mirror for the low end; each end misses at most
    (1 - c) / 2 of exchangeable errors, so both together hold at least c (c here
    the confidence + MARGIN).
    """
    count = len(errors)
    level = min(confidence + MARGIN, 0.99)
    rank = math.ceil((count + 1) * (1 + level) / 2)
    if count < MIN_SAMPLES or rank > count:
        return None
    return errors[count - rank], errors[rank - 1]


def relative_error(estimate, actual, estimated_at):
    """The error of `estimate`, made at `estimated_at`, in units of its lead + SCALE."""
    lead = max((estimate - estimated_at).total_seconds(), 0)
    return (actual - estimate).total_seconds() / (lead + SCALE)


def range_of(point, now, errors, confidence=CONFIDENCE):
    """The Range of a point estimate `point` seen at `now`, from sorted relative `errors`."""
    found = bound(errors, confidence)
    low, high = found or PRIOR
    scale = max((point - now).total_seconds(), 0) + SCALE
    starts_from = max(point + timedelta(seconds=low * scale), now)
    starts_to = max(point + timedelta(seconds=high * scale), starts_from)
    return Range(starts_from, starts_to, confidence, len(errors) if found else 0)


def recent_errors(now):
    """Sorted relative errors of the jobs that started in the last HISTORY_DAYS. One query."""
    rows = (
        BatchJob.objects.filter(
            first_eta__isnull=False,
            started_at__gt=now - timedelta(days=HISTORY_DAYS),
            started_at__lte=now,
        )
        .order_by("-started_at")
        .values_list("first_eta", "started_at", "created_at")[:MAX_SAMPLES]
    )
    return sorted(relative_error(*row) for row in rows)
