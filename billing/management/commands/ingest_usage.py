"""python manage.py ingest_usage --from 2027-01-04T00:00Z --to 2027-01-05T00:00Z"""

import sys
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from billing import actions, prometheus


def _instant(raw, name):
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        raise CommandError(f"--{name} {raw!r} is not a date and time like 2027-01-04T00:00Z")
    try:
        return actions.check_hour(moment, name)
    except ValidationError as exc:
        raise CommandError(f"--{name} {raw!r}: {exc.message_dict[name][0]}") from None


class Command(BaseCommand):
    help = "Meter the hours of [--from, --to) into the ledger (hour-aligned, UTC)."

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="start", required=True)
        parser.add_argument("--to", dest="end", required=True)

    def handle(self, *args, start, end, **options):
        start, end = _instant(start, "from"), _instant(end, "to")
        if end <= start:
            raise CommandError("--to must be after --from")
        total = int((end - start) / timedelta(hours=1))
        if total > 24 * 366:
            raise CommandError("At most a year at a time (8,784 hours).")
        changed = failed = 0
        for index in range(total):
            hour = start + timedelta(hours=index)
            try:
                changed += actions.ingest_hour(hour)
            except prometheus.NotConfigured as exc:
                raise CommandError(str(exc)) from None
            except prometheus.PrometheusError as exc:
                failed += 1
                self.stderr.write(f"\n{hour:%Y-%m-%dT%H:%MZ} left pending: {exc}")
            self._progress(index + 1, total, hour)
        self.stdout.write(
            f"\n{total} hours: {changed} changed, {total - changed - failed} unchanged, "
            f"{failed} pending."
        )
        if failed:
            sys.exit(1)

    def _progress(self, done, total, hour):
        width = 30
        filled = width * done // total
        bar = "#" * filled + "." * (width - filled)
        self.stdout.write(f"\r[{bar}] {done}/{total} {hour:%Y-%m-%dT%H:%MZ}", ending="")
        self.stdout.flush()
