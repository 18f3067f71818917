"""Occurrences of weekly windows: DST in several zones, midnight and multi-day
windows, exceptions. Times are checked as UTC instants."""

from datetime import UTC, date, datetime, time, timedelta

import pytest
import time_machine
from django.utils import timezone

from batch.occurrences import WeeklyRule, label, resolve, zone


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def rule(tz, days, start, end, end_day=None, exceptions=()):
    return WeeklyRule(tz, tuple(days), start, end, end_day, frozenset(exceptions))


def nightly(tz):
    return rule(tz, ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], time(22), time(6))


def test_it_opens_and_closes_at_local_times_in_utc():
    found = nightly("Europe/Berlin").between(utc(2026, 1, 5), utc(2026, 1, 6))
    # Jan 4 22:00 CET (still open at midnight UTC) and Jan 5 22:00 CET.
    assert [(o.opens_at, o.closes_at) for o in found] == [
        (utc(2026, 1, 4, 21), utc(2026, 1, 5, 5)),
        (utc(2026, 1, 5, 21), utc(2026, 1, 6, 5)),
    ]


@pytest.mark.parametrize(
    "tz, spring_night, fall_night",
    [
        ("Europe/Berlin", date(2026, 3, 28), date(2026, 10, 24)),
        ("America/New_York", date(2026, 3, 7), date(2026, 10, 31)),
        ("Australia/Sydney", date(2026, 10, 3), date(2026, 4, 4)),
    ],
)
def test_it_is_an_hour_shorter_or_longer_on_the_night_the_clocks_change(
    tz, spring_night, fall_night
):
    every_night = nightly(tz)

    def night_of(day):
        opens = resolve(day, time(22), zone(tz))
        (found,) = [o for o in every_night.between(opens, opens + timedelta(hours=1))]
        return found

    assert night_of(spring_night).duration == timedelta(hours=7)
    assert night_of(fall_night).duration == timedelta(hours=9)
    assert night_of(spring_night - timedelta(days=1)).duration == timedelta(hours=8)


def test_a_start_in_the_spring_gap_opens_when_the_clocks_jump():
    # 02:30 does not exist in New York on 8 March 2026: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    early = rule("America/New_York", ["sun"], time(2, 30), time(5))
    (found,) = early.between(utc(2026, 3, 8), utc(2026, 3, 9))
    assert found.opens_at == utc(2026, 3, 8, 7)
    assert found.closes_at == utc(2026, 3, 8, 9)  # 05:00 EDT


def test_a_start_in_the_spring_gap_in_europe():
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST, i.e. 01:00 UTC.
    early = rule("Europe/Berlin", ["sun"], time(2, 15), time(4))
    (found,) = early.between(utc(2026, 3, 29), utc(2026, 3, 30))
    assert found.opens_at == utc(2026, 3, 29, 1)


def test_a_start_that_happens_twice_opens_at_the_first():
    # 01:30 happens twice in New York on 1 November 2026: first at EDT (05:30 UTC).
    early = rule("America/New_York", ["sun"], time(1, 30), time(4))
    (found,) = early.between(utc(2026, 11, 1), utc(2026, 11, 2))
    assert found.opens_at == utc(2026, 11, 1, 5, 30)
    assert found.closes_at == utc(2026, 11, 1, 9)  # 04:00 EST
    assert found.duration == timedelta(hours=3, minutes=30)


def test_an_occurrence_wholly_inside_the_gap_is_skipped():
    inside = rule("Europe/Berlin", ["sun"], time(2, 10), time(2, 50))
    assert inside.between(utc(2026, 3, 29), utc(2026, 3, 30)) == []
    assert len(inside.between(utc(2026, 4, 5), utc(2026, 4, 6))) == 1


def test_a_window_over_a_weekend_is_one_occurrence():
    weekend = rule("America/New_York", ["fri"], time(20), time(6), end_day="mon")
    (found,) = weekend.between(utc(2026, 6, 5), utc(2026, 6, 9))
    assert found.opens_at == utc(2026, 6, 6, 0)  # Fri 20:00 EDT
    assert found.closes_at == utc(2026, 6, 8, 10)  # Mon 06:00 EDT
    assert found.duration == timedelta(hours=58)
    assert label(found, "America/New_York") == "Fri 05 Jun 20:00-Mon 06:00 America/New_York"


def test_a_weekend_window_crossing_the_fall_change_is_an_hour_longer():
    weekend = rule("America/New_York", ["fri"], time(20), time(6), end_day="mon")
    (found,) = weekend.between(utc(2026, 10, 31), utc(2026, 11, 1))
    assert found.duration == timedelta(hours=59)


def test_exceptions_skip_the_local_opening_day():
    # 24 Dec 2026 is a Thursday; in Tokyo the window opens that local evening.
    weekdays = rule(
        "Asia/Tokyo", ["wed", "thu", "fri"], time(21), time(7), exceptions=["2026-12-24"]
    )
    found = weekdays.between(utc(2026, 12, 23), utc(2026, 12, 26))
    assert [o.local_date for o in found] == [date(2026, 12, 23), date(2026, 12, 25)]


def test_a_half_open_range_takes_an_occurrence_that_closes_after_its_start_only():
    daily = nightly("UTC")
    assert [o.opens_at for o in daily.between(utc(2026, 1, 2, 6), utc(2026, 1, 2, 22))] == []
    assert len(daily.between(utc(2026, 1, 2, 5, 59), utc(2026, 1, 2, 22, 0, 1))) == 2


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata"])
def test_next_after_now_travels_with_the_clock(tz):
    saturdays = rule(tz, ["sat"], time(9), time(17))
    with time_machine.travel(datetime(2026, 7, 1, 12, tzinfo=UTC), tick=False):
        upcoming = saturdays.next_after(timezone.now())
    local_open = upcoming.opens_at.astimezone(zone(tz))
    assert (local_open.date(), local_open.time()) == (date(2026, 7, 4), time(9))
    with time_machine.travel(upcoming.opens_at + timedelta(hours=1), tick=False):
        assert saturdays.next_after(timezone.now()) == upcoming  # open now


@pytest.mark.parametrize(
    "bad, field",
    [
        (rule("Mars/Olympus", ["mon"], time(1), time(2)), "timezone"),
        (rule("UTC", [], time(1), time(2)), "days"),
        (rule("UTC", ["monday"], time(1), time(2)), "days"),
        (rule("UTC", ["mon"], time(1), time(1)), "end_time"),
        (rule("UTC", ["mon", "tue"], time(20), time(6), end_day="thu"), "end_day"),
        (rule("UTC", ["mon"], time(1), time(2), exceptions=["2026-13-01"]), "exceptions"),
    ],
)
def test_a_rule_that_cannot_work_names_its_field(bad, field):
    assert field in bad.errors()


def test_a_window_may_last_almost_a_week():
    long = rule("UTC", ["sun"], time(21), time(20), end_day="sun")
    assert long.errors() == {}
    (found,) = long.between(utc(2026, 6, 7, 21), utc(2026, 6, 7, 22))
    assert found.duration == timedelta(days=7, hours=-1)
