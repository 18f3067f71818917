"""How often jobs started inside the start range shown at their submission, over
this installation's own history (batch.backtest). The last line is the share."""

import statistics
import time
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from batch import backtest, eta
from cluster import clock

MAX_DAYS = 366


def _days(raw):
    try:
        days = int(raw)
    except ValueError:
        raise CommandError(f"--days must be a whole number of days, not {raw!r}.") from None
    if not 1 <= days <= MAX_DAYS:
        raise CommandError(f"--days must be between 1 and {MAX_DAYS}, not {days}.")
    return days


def _confidence(raw):
    try:
        value = float(raw)
    except ValueError:
        raise CommandError(f"--confidence must be a number such as 0.8, not {raw!r}.") from None
    if not 0 < value < 1:
        raise CommandError(f"--confidence must be above 0 and below 1 (0.8 is 80 %), not {raw}.")
    return value


def _until(raw):
    moment = parse_datetime(raw) if raw else None
    if moment is None or moment.tzinfo is None:
        raise CommandError(
            f"--until must be an ISO 8601 date and time with its offset, such as "
            f"2026-12-01T00:00:00Z, not {raw!r}."
        )
    return moment


def _hours(seconds):
    return f"{seconds / 3600:+.1f} h" if abs(seconds) >= 3600 else f"{seconds / 60:+.0f} min"


class Command(BaseCommand):
    help = (
        "Replay the batch jobs submitted in a period through the planner as it was at each "
        "submission and report how often their actual start fell inside the range shown."
    )

    def add_arguments(self, parser):
        # Strings, parsed below: a bad value is a sentence naming the option.
        parser.add_argument("--days", default="30", help="Length of the period (default 30).")
        parser.add_argument("--until", help="End of the period, ISO 8601 (default: now).")
        parser.add_argument(
            "--confidence",
            default=str(eta.CONFIDENCE),
            help=f"The range's confidence (default {eta.CONFIDENCE}).",
        )

    def handle(self, *args, **options):
        days = _days(options["days"])
        confidence = _confidence(options["confidence"])
        until = _until(options["until"]) if options["until"] is not None else clock.now()
        since = until - timedelta(days=days)
        started = time.perf_counter()
        found = backtest.replay(backtest.rows(since, until), since, until, confidence=confidence)
        seconds = time.perf_counter() - started
        if not found:
            raise CommandError(
                f"No batch jobs were submitted from {since:%Y-%m-%d %H:%M} to "
                f"{until:%Y-%m-%d %H:%M} UTC: nothing to replay."
            )
        counted = [r for r in found if r.range and r.actual]
        if not counted:
            raise CommandError(
                f"None of the {len(found)} jobs submitted in the period both had a planned "
                "start at submission and started by its end: nothing to compare."
            )
        out = self.stdout.write
        out(
            f"Replayed {len(found)} submissions from {since:%Y-%m-%d %H:%M} to "
            f"{until:%Y-%m-%d %H:%M} UTC through the planner in {seconds:.1f} s."
        )
        out(
            f"Planned at submission: {sum(1 for r in found if r.estimate)}; "
            f"of those, started by the end: {len(counted)}."
        )
        errors = sorted((r.actual - r.estimate).total_seconds() for r in counted)
        deciles = statistics.quantiles(errors, n=10, method="inclusive") if len(errors) > 1 else []
        if deciles:
            out(
                "Actual start less the estimate: "
                f"10 % {_hours(deciles[0])}, median {_hours(deciles[4])}, "
                f"90 % {_hours(deciles[8])}."
            )
        widths = [(r.range.starts_to - r.range.starts_from).total_seconds() for r in counted]
        prior = sum(1 for r in counted if r.range.samples == 0)
        out(
            f"Median width of the range: {_hours(statistics.median(widths)).lstrip('+')}; "
            f"{prior} range{'s' * (prior != 1)} from the prior (fewer than "
            f"{eta.MIN_SAMPLES} starts known then)."
        )
        inside = sum(1 for r in counted if r.inside)
        out(
            f"{100 * inside / len(counted):.1f} % of actual starts fell inside their "
            f"{100 * confidence:g} % range ({inside} of {len(counted)})."
        )
