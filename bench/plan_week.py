"""The batch planner on 10,000 queued jobs of 200 teams into a week of windows.

    .venv/bin/python bench/plan_week.py [--jobs 10000] [--teams 200] [--runs 5]

Pure: no database, no cluster (the planner is a function of its input). Windows:
every night 20:00-06:00 UTC on four flavors (64, 32, 48 and 16 GPUs), plus a
weekend window Fri 20:00 to Mon 06:00 on the first two. Jobs: 1-8 GPUs, 1-10 h,
priorities -2..2, team weights 1-3, recent usage 0-50 GPU-hours, drawn from a
fixed seed. Prints the median planning time over the runs, the peak memory the
planning allocates (tracemalloc, a separate run) and how much was planned;
docs/benchmarks.md records the figures under "Batch planner".
"""

import argparse
import random
import statistics
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batch.planner import Job, Slot, plan

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)  # a Monday
FLAVORS = {1: 64, 2: 32, 3: 48, 4: 16}


def week_of_slots():
    slots = []
    for day in range(7):
        opens = NOW + timedelta(days=day, hours=8)  # 20:00
        for flavor, capacity in FLAVORS.items():
            slots.append(Slot(1, flavor, opens, opens + timedelta(hours=10), capacity, "night"))
    weekend = NOW + timedelta(days=4, hours=8)  # Fri 20:00 to Mon 06:00
    for flavor in (1, 2):
        slots.append(Slot(2, flavor, weekend, weekend + timedelta(hours=58), 16, "weekend"))
    return slots


def queued_jobs(count, teams, seed=7):
    rng = random.Random(seed)
    return [
        Job(
            id=n,
            team_id=rng.randrange(teams),
            flavor_id=rng.choice(list(FLAVORS)),
            gpus=rng.choice([1, 1, 2, 2, 4, 8]),
            runtime=timedelta(hours=rng.randint(1, 10)),
            priority=rng.randint(-2, 2),
            submitted_at=NOW - timedelta(minutes=rng.randrange(10_000)),
        )
        for n in range(count)
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    rng = random.Random(11)
    slots = week_of_slots()
    jobs = queued_jobs(options.jobs, options.teams)
    weights = {team: rng.randint(1, 3) for team in range(options.teams)}
    usage = {team: rng.randint(0, 50) for team in range(options.teams)}

    def run():
        # Counted for no-starvation for good (as replan does within its lead time):
        # the first night's occurrences, so the bench pays for keeping the counters.
        return plan(
            slots,
            jobs,
            now=NOW,
            weights=weights,
            recent_usage=usage,
            settle_until=NOW + timedelta(hours=12),
        )

    times = []
    for _ in range(options.runs):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    again = run()
    assert again.placements == result.placements, "not deterministic"
    teams_served = len({j.team_id for j in jobs if j.id in result.placements})
    print(f"jobs {len(jobs)}, teams {options.teams}, slots {len(slots)}")
    print(f"planned {len(result.placements)} jobs of {teams_served} teams")
    print(
        f"planning time: median {statistics.median(times):.3f} s, "
        f"min {min(times):.3f} s, max {max(times):.3f} s over {options.runs} runs"
    )
    print(f"peak memory allocated while planning: {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
