"""The batch job list and calendar, and the dashboard's recent decisions, at 2,000 and
20,000 rows, side by side in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_perfbench \
        .venv/bin/python bench/batch_pages.py [--sizes 2000 20000] [--runs 7]

PostgreSQL only: one database per size, named after DATABASE_URL's with the size
appended (portal_perfbench_2000, ...), dropped and created; the name must contain
"bench". Per size: daily_pages' quota requests (200 teams, their submit and decision
events) and as many batch jobs, spread over a history that grows with their number
(a portal's history grows with time, not with its capacity): two daily windows over
four flavors, finished jobs in the past openings, 600 planned jobs in the next two
weeks' (their number does not grow), 50 queued. Each page through Django's test
client in process (server time, no network), as an admin and as a member of a busy
team (a tenth of the jobs: a full page at each size), the sizes in turn for each
figure and round so the machine's load falls on all of them alike; min / median of
`--runs` rounds after one to warm up. The ratio is the median over the rounds of the
largest size's time over the smallest's (goal: at most 1.3x). The dashboard's recent-
decisions query (`views._recent_events` for a page of 20 teams) is timed alone too,
and the rows PostgreSQL reads for the job list, the calendar and that query (EXPLAIN
ANALYZE).
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import time as clock_time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.daily_pages import populate, recreate_database  # noqa: E402

TEAMS = 200
PLANNED_AHEAD_DAYS = 14


def say(text):
    print(text, file=sys.stderr, flush=True)


def populate_batch(size, seed=7):
    """`size` batch jobs of the 200 teams daily_pages made; (member, member's team)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from batch.models import BatchJob, BatchWindow, WindowCapacity
    from cluster.models import Flavor
    from teams.models import Team

    rng = random.Random(seed)
    admin = get_user_model().objects.get(username="bench-admin")
    teams = list(Team.objects.order_by("pk"))
    flavors = list(Flavor.objects.order_by("pk"))[:4]
    windows = [
        BatchWindow.objects.create(
            name=name,
            timezone="Europe/Berlin",
            days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            start_time=clock_time(start),
            end_time=clock_time(end),
        )
        for name, start, end in [("Nightly", 20, 6), ("Lunch", 12, 14)]
    ]
    for window in windows:
        WindowCapacity.objects.bulk_create(
            WindowCapacity(window=window, flavor=flavor, gpus=16) for flavor in flavors
        )
    now = timezone.now()
    history = timedelta(days=int(60 * size / 2000))
    past = [(w, o) for w in windows for o in w.occurrences(now - history, now)]
    ahead = [(w, o) for w in windows for o in w.occurrences(now, now + timedelta(days=14))]
    Status = BatchJob.Status
    planned_jobs = 600  # the next two weeks' plan: what a calendar shows, whatever the history
    rows = []
    for n in range(size):
        # The first team is a busy one: a full page of its own jobs at every size.
        team = teams[0] if n % 10 == 0 else rng.choice(teams)
        flavor = rng.choice(flavors)
        gpus = rng.choice([1, 1, 2, 4])
        minutes = rng.randrange(30, 240)
        job = BatchJob(
            team=team,
            name=f"job-{n}",
            flavor=flavor,
            image="nvcr.io/nvidia/pytorch:24.01-py3",
            gpus=gpus,
            expected_runtime_minutes=minutes,
            max_runtime_minutes=minutes * 2,
            estimated_cost=Decimal(gpus * minutes) / 30,
            on_demand_cost=Decimal(gpus * minutes) / 15,
            created_by=admin,
        )
        if n < planned_jobs:
            window, occurrence = rng.choice(ahead)
            job.status = Status.PLANNED
        elif n < planned_jobs + 50:
            job.status, window, occurrence = Status.QUEUED, None, None
        else:
            window, occurrence = rng.choice(past)
            job.status = rng.choice([Status.SUCCEEDED] * 8 + [Status.FAILED, Status.CANCELLED])
        if window is not None:
            job.window, job.opens_at, job.closes_at = (
                window,
                occurrence.opens_at,
                occurrence.closes_at,
            )
            job.planned_start = occurrence.opens_at
            job.planned_end = occurrence.opens_at + timedelta(minutes=minutes)
            if job.status != Status.PLANNED:
                job.started_at, job.finished_at = job.planned_start, job.planned_end
                job.used_gpu_seconds = gpus * minutes * 60
        rows.append(job)
    BatchJob.objects.bulk_create(rows, batch_size=2000)
    with connection.cursor() as cursor:
        # created_at is auto_now_add: a job was submitted a day or so before its opening.
        cursor.execute(
            "UPDATE batch_batchjob SET created_at = "
            "coalesce(opens_at, now()) - (interval '1 minute' * (id % 2000))"
        )
        cursor.execute("VACUUM ANALYZE")
    team = teams[0]
    member = team.memberships.select_related("user").first().user
    return member, team


def rows_read(queryset):
    """Rows PostgreSQL read from tables and indexes for `queryset` (EXPLAIN ANALYZE)."""
    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = plan if isinstance(plan, list) else json.loads(plan)

    def walk(node):
        own = node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
        scanned = own + node.get("Rows Removed by Filter", 0)
        if "Scan" not in node["Node Type"]:
            scanned = 0
        return scanned + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan[0]["Plan"])


def use(name):
    """Point Django's connection at database `name` (one per size)."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


def prepare(name, size):
    """Fill database `name`; the pages to time there, {figure: call}, and rows read."""
    from django.test import Client
    from django.utils import timezone

    from batch import actions as batch_actions
    from batch import calendar
    from batch.models import BatchJob
    from gpu_requests import views
    from teams.models import Team

    use(name)
    reviewer = populate(size)
    member, team = populate_batch(size)
    admin, person = Client(), Client()
    admin.force_login(reviewer)
    person.force_login(member)

    def get(client, url):
        def call():
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return call

    page_teams = list(Team.objects.order_by("name", "pk").values_list("pk", flat=True)[:20])
    calls = {
        "job list, admin": get(admin, "/batch/jobs/"),
        "job list, admin, one team": get(admin, f"/batch/jobs/?team={team.slug}"),
        "job list, member": get(person, "/batch/jobs/"),
        "calendar, admin": get(admin, "/batch/"),
        "calendar, member": get(person, "/batch/"),
        "dashboard, all teams": get(admin, "/"),
        "recent decisions query (20 teams)": lambda: list(views._recent_events(page_teams)),
    }
    now = timezone.now()
    windows = batch_actions.windows_with_occurrences(now, now + batch_actions.horizon())
    reads = {
        "job list, admin": rows_read(BatchJob.objects.all()[:50]),
        "calendar, admin": rows_read(calendar.planned_jobs(windows)),
        "recent decisions query (20 teams)": rows_read(views._recent_events(page_teams)),
    }
    return calls, reads


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)
    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    os.environ["PORTAL_LOG_LEVEL"] = "WARNING"
    names = {}
    for size in args.sizes:
        names[size] = f"{urlsplit(url).path.lstrip('/')}_{size}"
        os.environ["DATABASE_URL"] = urlunsplit(urlsplit(url)._replace(path=f"/{names[size]}"))
        recreate_database(os.environ["DATABASE_URL"])  # and migrates it
    import django

    django.setup()
    prepared = {}
    for size in args.sizes:
        say(f"populating {size} requests and {size} batch jobs ...")
        prepared[size] = prepare(names[size], size)
    # Side by side: each figure at each size in turn, so the machine's load falls on both.
    times = {size: {name: [] for name in prepared[size][0]} for size in args.sizes}
    for _ in range(args.runs + 1):  # the first round warms each page
        for name in prepared[args.sizes[0]][0]:
            for size in args.sizes:
                use(names[size])
                start = time.perf_counter()
                prepared[size][0][name]()
                times[size][name].append(time.perf_counter() - start)
    use(names[args.sizes[0]])
    print(f"{'':36}" + "".join(f"{size:>22,}" for size in args.sizes) + "   ratio")
    for name in times[args.sizes[0]]:
        runs = {size: times[size][name][1:] for size in args.sizes}
        cells = [
            f"{min(runs[size]) * 1000:>9.1f} / {statistics.median(runs[size]) * 1000:.1f} ms"
            for size in args.sizes
        ]
        # Each round's largest over smallest, measured moments apart: the load cancels.
        ratio = statistics.median(
            big / small
            for small, big in zip(runs[args.sizes[0]], runs[args.sizes[-1]], strict=True)
        )
        print(f"{name:36}" + "".join(cell.rjust(22) for cell in cells) + f"   {ratio:5.2f}x")
    for name in prepared[args.sizes[0]][1]:
        cells = "".join(f"{prepared[size][1][name]:>22,}" for size in args.sizes)
        print(f"{'rows read: ' + name:36}" + cells)


if __name__ == "__main__":
    main()
