"""The start-range backtest's cost as the number of jobs in a month grows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench_eta \
        .venv/bin/python bench/backtest_eta.py [--gpus 4 8 16 32 64] [--runs 3]

PostgreSQL only; the database (its name must contain "bench") is dropped and
created. One daily two-hour window on one flavor whose batch capacity is each of
`--gpus` in turn: the made-up month (batch.history, the demo's arrival pattern,
sized to the capacity) holds proportionally more jobs. Per size: the time to make
the month up (its planner runs), and `manage.py backtest_eta`'s replay (min and
median of `--runs`), with the share of starts inside the range.
"""

import argparse
import os
import statistics
import sys
import time
from datetime import time as clock_time
from decimal import Decimal
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.daily_pages import recreate_database  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    recreate_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from batch import actions, history
    from batch.models import BatchJob
    from cluster import clock
    from cluster.models import Flavor
    from teams.models import Membership, Team

    admin = get_user_model().objects.create_superuser("bench-admin", "a@example.com", "x")
    flavor = Flavor.objects.create(
        slug="a100",
        name="A100",
        gpu_model="NVIDIA A100",
        memory_gb=80,
        resource_name="nvidia.com/gpu",
        node_selector={},
        capacity=max(options.gpus),
        price_per_gpu_hour=Decimal("2.5"),
    )
    members = {}
    for slug in ("vision", "nlp", "speech"):
        team = Team.objects.create(slug=slug, name=slug.title())
        user = get_user_model().objects.create_user(slug, f"{slug}@example.com", "x")
        Membership.objects.create(team=team, user=user)
        members[team.pk] = user
    window = None
    print("| window GPUs | jobs | making the month up | replay min / median | inside |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for gpus in options.gpus:
        BatchJob.objects.all().delete()
        window = actions.save_window(
            window,
            by=admin,
            capacity={flavor: gpus},
            name="Daily",
            timezone="UTC",
            days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            start_time=clock_time(12),
            end_time=clock_time(14),
            exceptions=[],
            price_factor="0.5",
            spot_allowed=True,
        )
        started = time.perf_counter()
        jobs = history.month("demo", until=clock.now(), members=members)
        made = time.perf_counter() - started
        times, last = [], ""
        for _ in range(options.runs):
            out = StringIO()
            started = time.perf_counter()
            call_command("backtest_eta", stdout=out)
            times.append(time.perf_counter() - started)
            last = out.getvalue().splitlines()[-1]
        print(
            f"| {gpus} | {jobs} | {made:.2f} s | {min(times):.2f} / "
            f"{statistics.median(times):.2f} s | {last.split(' of actual')[0]} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
