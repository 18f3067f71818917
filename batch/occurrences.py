"""Occurrences of a weekly window: half-open `[opens_at, closes_at)` in UTC.

Pure functions, no database. Local times are read in the window's IANA zone
(zoneinfo) and turned into instants by one rule, `resolve()`:

- a local time that happens once is that instant;
- one that does not exist that day (clocks spring forward over it) is the
  first instant after the gap, i.e. the moment the clocks jump;
- one that happens twice (clocks fall back) is the first of the two.

So a window from 22:00 to 06:00 is an hour shorter on the night the clocks
spring forward and an hour longer when they fall back, and an occurrence whose
start and end both fall into one gap is empty and skipped.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def zone(name):
    """The ZoneInfo for an IANA name, or ValueError naming it."""
    if not isinstance(name, str) or name not in _zone_names():
        raise ValueError(f"Unknown time zone {name!r}; use an IANA name such as Europe/Berlin.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Unknown time zone {name!r}.") from None


_ZONES = None


def _zone_names():
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones())
    return _ZONES


def resolve(day, at, tz):
    """The UTC instant of local `day` `at` in `tz`, by the rule in the module's docstring."""
    local = datetime.combine(day, at)
    first = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == local:
        return first  # exists; fold=0 is the first of two when it happens twice
    # In a gap: fold=0 reads it with the offset before the jump (an instant
    # after it), fold=1 with the offset after (an instant before it). The jump
    # lies between the two; find it to the second.
    later, earlier = first, local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    before = earlier.astimezone(tz).utcoffset()
    low, high = earlier, later
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


@dataclass(frozen=True)
class Occurrence:
    opens_at: datetime
    closes_at: datetime
    local_date: date  # the local day it opens, which exceptions name

    @property
    def duration(self):
        return self.closes_at - self.opens_at

    def contains(self, instant):
        return self.opens_at <= instant < self.closes_at


@dataclass(frozen=True)
class WeeklyRule:
    timezone: str
    days: tuple  # of WEEKDAYS
    start: time
    end: time
    end_day: str | None = None
    exceptions: frozenset = frozenset()  # ISO dates, local

    def errors(self):
        """{field: [message]} for a rule that cannot make sense; empty when valid."""
        errors = {}
        try:
            zone(self.timezone)
        except ValueError as exc:
            errors["timezone"] = [str(exc)]
        bad = [d for d in self.days if d not in WEEKDAYS]
        if not self.days:
            errors["days"] = ['Name at least one day, e.g. ["fri"].']
        elif bad or len(set(self.days)) != len(self.days):
            errors["days"] = [f"Use distinct days among {', '.join(WEEKDAYS)}."]
        if self.end_day is not None and self.end_day not in WEEKDAYS:
            errors["end_day"] = [f"Use one of {', '.join(WEEKDAYS)}."]
        if self.end_day is None and self.start == self.end:
            errors["end_time"] = ["The end time must differ from the start time."]
        for value in self.exceptions:
            try:
                date.fromisoformat(value)
            except (TypeError, ValueError):
                errors["exceptions"] = [f"{value!r} is not a date (YYYY-MM-DD)."]
                break
        # One opening day per week with an end day: occurrences can never overlap.
        if not errors and self.end_day is not None and len(self.days) > 1:
            errors["end_day"] = ["An end day fits a window that opens on one day only."]
        return errors

    def _span_days(self, opening_day):
        """Midnights between the local opening and closing days."""
        if self.end_day is None:
            return 0 if self.end > self.start else 1
        span = (WEEKDAYS.index(self.end_day) - opening_day.weekday()) % 7
        if span == 0 and self.end <= self.start:
            span = 7
        return span

    @property
    def max_span(self):
        return timedelta(days=8)

    def between(self, starts_at, ends_at):
        """Occurrences that meet [starts_at, ends_at), oldest first."""
        tz = zone(self.timezone)
        wanted = {WEEKDAYS.index(d) for d in self.days}
        first = (starts_at - self.max_span).astimezone(tz).date()
        last = ends_at.astimezone(tz).date()
        found = []
        day = first
        while day <= last:
            if day.weekday() in wanted and day.isoformat() not in self.exceptions:
                opens = resolve(day, self.start, tz)
                closes = resolve(day + timedelta(days=self._span_days(day)), self.end, tz)
                if opens < closes and closes > starts_at and opens < ends_at:
                    found.append(Occurrence(opens, closes, day))
            day += timedelta(days=1)
        return found

    def next_after(self, instant, *, limit=timedelta(days=400)):
        """The first occurrence that closes after `instant` (one may be open now)."""
        step = timedelta(days=14)
        starts_at = instant
        while starts_at < instant + limit:
            found = self.between(starts_at, starts_at + step)
            later = [o for o in found if o.closes_at > instant]
            if later:
                return later[0]
            starts_at += step
        return None

    def describe(self):
        days = ", ".join(d.title() for d in self.days)
        until = f"{self.end_day.title()} " if self.end_day else ""
        return f"{days} {self.start:%H:%M}-{until}{self.end:%H:%M} {self.timezone}"


def label(occurrence, tz_name):
    """'Fri 20:00-02:00 America/New_York', for plan explanations."""
    tz = zone(tz_name)
    opens = occurrence.opens_at.astimezone(tz)
    closes = occurrence.closes_at.astimezone(tz)
    same_day = closes.date() == opens.date()
    end = (
        f"{closes:%H:%M}"
        if same_day or closes - opens < timedelta(days=1)
        else f"{closes:%a %H:%M}"
    )
    return f"{opens:%a %d %b %H:%M}-{end} {tz_name}"
