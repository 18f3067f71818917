"""The start range's backtest (`manage.py backtest_eta`, batch/backtest.py): a month
of history replayed through the planner as it was at each submission, and the
share of actual starts inside the range shown then."""

import re
import time
from datetime import UTC, datetime
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command

# The demo is seeded at a moment of the day of its own; this one is a Monday noon.
SEEDED = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
def demo(allowlist, admin_user, alice, bob, a100):
    """What `make demo` seeds of batch (seed_batch: the Demo window, its jobs)."""
    with time_machine.travel(SEEDED, tick=False):
        yield


def seed(pattern):
    with time_machine.travel(SEEDED, tick=False):
        call_command("seed_batch", history=pattern, stdout=StringIO())


def backtest(*args):
    out = StringIO()
    started = time.perf_counter()
    with time_machine.travel(SEEDED, tick=False):
        call_command("backtest_eta", *args, stdout=out)
    print(out.getvalue(), f"{time.perf_counter() - started:.1f} s")
    return out.getvalue().splitlines()


def share(lines):
    return float(lines[-1].split(" %")[0])


def test_the_demos_month_starts_inside_its_range_at_least_80_percent_of_the_time(demo):
    seed("demo")
    started = time.perf_counter()
    lines = backtest()
    assert time.perf_counter() - started < 10  # a month replays in well under a second here
    assert lines[0].startswith("Replayed 173 submissions from 2026-10-31 12:00 to 2026-11-30")
    assert share(lines) >= 80, lines
    assert lines[-1].endswith("inside their 80 % range (149 of 173)."), lines


def test_a_held_out_month_of_monday_bursts_does_too(demo):
    """Another arrival pattern, not the one the prior was measured on: most of a
    week's work sent on Monday morning, so estimates are days out and move more."""
    seed("monday-bursts")
    lines = backtest()
    assert share(lines) >= 80, lines
    assert lines[-1].endswith("(149 of 170)."), lines


def test_another_confidence_gives_another_range(demo):
    seed("demo")
    assert share(backtest("--confidence", "0.5")) < share(backtest())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--days", "0"], "--days must be between 1 and 366, not 0."),
        (["--days", "a month"], "--days must be a whole number of days, not 'a month'."),
        (["--confidence", "80"], "--confidence must be above 0 and below 1 (0.8 is 80 %)"),
        (["--confidence", "high"], "--confidence must be a number such as 0.8, not 'high'."),
        (["--until", "yesterday"], "--until must be an ISO 8601 date and time with its offset"),
        (["--until", "2026-11-01T00:00"], "--until must be an ISO 8601 date and time with"),
        (["--horizon", "3"], "unrecognized arguments: --horizon 3"),
    ],
)
def test_a_bad_parameter_is_named(demo, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        backtest(*args)


def test_a_period_without_jobs_says_there_is_nothing_to_replay(demo):
    with pytest.raises(CommandError, match="No batch jobs were submitted from 2026-10-31 12:00"):
        backtest()
