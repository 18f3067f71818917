"""Billing at scale: the showback figures against raw SQL, and one hour of ingestion
against Prometheus' own time.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_billing_bench \\
        .venv/bin/python bench/billing_ledger.py [--days 180] [--teams 200] [--gpus 2000]

1. Fills the ledger: teams x 4 flavors x days x 24 hourly TeamUsage rows
   (200 x 4 x 180 x 24 = 3.46 M), a month of WorkloadUsage (3 workloads per
   team) and FlavorHour, with INSERT ... SELECT generate_series.
2. Times the team page's figures (billing.reports.team_report) and the admin
   month view's (admin_teams + cluster_totals + flavor_utilisation), each
   against hand-written GROUP BY queries giving the same answer; prints the
   ratio and the query count.
3. Writes an hour of history for `--gpus` GPUs (one pod each), loads it with
   promtool into a Prometheus, and times `ingest_hour` against the eight
   PromQL queries alone (`metering.fetch_hour`).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from billing import actions, metering, reports  # noqa: E402
from billing.models import FlavorHour, IngestedHour, TeamUsage, WorkloadUsage  # noqa: E402
from cluster.models import Flavor  # noqa: E402
from teams.models import Team  # noqa: E402

START = datetime(2026, 5, 1, tzinfo=UTC)


def best_of(function, runs=5):
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return min(times), statistics.median(times)


def side_by_side(ours, theirs, runs=9):
    """Alternate the two, so a busy machine slows both alike: (best, median) of each."""
    mine, raws = [], []
    for _ in range(runs):
        for function, times in ((ours, mine), (theirs, raws)):
            began = time.perf_counter()
            function()
            times.append(time.perf_counter() - began)
    return (min(mine), statistics.median(mine)), (min(raws), statistics.median(raws))


def fill(teams, days):
    if TeamUsage.objects.count() == teams * 4 * days * 24:
        print(f"ledger already filled ({TeamUsage.objects.count():,} rows)")
        return
    for model in (TeamUsage, WorkloadUsage, FlavorHour, IngestedHour):
        model.objects.all().delete()
    Team.objects.bulk_create(
        [Team(name=f"Team {n}", slug=f"team-{n}") for n in range(teams)], ignore_conflicts=True
    )
    for n, (slug, price) in enumerate(
        [("h100", "4.00"), ("a100", "2.80"), ("l4", "0.80"), ("t4", "0.35")]
    ):
        Flavor.objects.get_or_create(
            slug=slug,
            defaults={
                "name": slug.upper(),
                "gpu_model": slug,
                "memory_gb": 80,
                "capacity": 400 + n,
                "price_per_gpu_hour": price,
            },
        )
    hours = days * 24
    began = time.perf_counter()
    with connection.cursor() as cursor:
        # Allocation varies by team, flavor and hour; active/idle/unmetered split it.
        cursor.execute(
            f"""
            INSERT INTO billing_teamusage (hour, team_id, flavor_id, allocated_seconds,
                active_seconds, idle_seconds, unmetered_seconds, reserved_seconds,
                reserved_unallocated_seconds, lost_seconds, spot_seconds, price_factor, price)
            SELECT %s::timestamptz + h * interval '1 hour', t.id, f.id,
                   a * 3600, a * 2400, a * 1000, a * 200, 8 * 3600,
                   GREATEST(8 * 3600 - a * 3600, 0), 0, 0, 1, f.price_per_gpu_hour
            FROM generate_series(0, {hours - 1}) h
            CROSS JOIN gpu_requests_team t
            CROSS JOIN gpu_requests_flavor f
            CROSS JOIN LATERAL (SELECT ((t.id * 7 + f.id * 3 + h) %% 9) AS a) alloc
            """,
            [START],
        )
        month = hours - 30 * 24
        cursor.execute(
            f"""
            INSERT INTO billing_workloadusage (hour, team_id, flavor_id, namespace, kind, name,
                allocated_seconds, active_seconds, idle_seconds, unmetered_seconds, gpus,
                activity_mean, activity_histogram, fb_peak_mib, spot_seconds, price_factor, price)
            SELECT %s::timestamptz + h * interval '1 hour', t.id, f.id, t.slug, 'Job',
                   'job-' || w, 3600 * (w + 1), 2400 * (w + 1), 1200 * (w + 1), 0, w + 1,
                   0.4, '{{"40": 60}}'::jsonb, 20000, 0, 1, f.price_per_gpu_hour
            FROM generate_series({month}, {hours - 1}) h
            CROSS JOIN gpu_requests_team t
            CROSS JOIN generate_series(0, 2) w
            JOIN gpu_requests_flavor f ON f.slug = 'h100'
            """,
            [START],
        )
        cursor.execute(
            f"""
            INSERT INTO billing_flavorhour (hour, flavor_id, capacity_seconds, reserved_seconds,
                team_allocated_seconds, team_reserved_unallocated_seconds,
                other_allocated_seconds, batch_set_aside_unused_seconds, unreserved_seconds,
                active_seconds, spot_capacity_seconds, price_factor, price)
            SELECT %s::timestamptz + h * interval '1 hour', f.id, f.capacity * 3600, 0,
                   0, 0, 0, 0, f.capacity * 3600, 0, 0, 1, f.price_per_gpu_hour
            FROM generate_series(0, {hours - 1}) h CROSS JOIN gpu_requests_flavor f
            """,
            [START],
        )
        cursor.execute("ANALYZE")
    print(f"filled {TeamUsage.objects.count():,} team rows in {time.perf_counter() - began:.0f} s")


RAW_TEAM = [
    # by flavor
    """SELECT f.slug, SUM(u.allocated_seconds) / 3600.0, SUM(u.active_seconds) / 3600.0,
              SUM(u.idle_seconds) / 3600.0, SUM(u.unmetered_seconds) / 3600.0,
              SUM(u.reserved_seconds) / 3600.0, SUM(u.reserved_unallocated_seconds) / 3600.0,
              SUM(u.lost_seconds) / 3600.0, SUM(u.lost_seconds * u.price) / 3600,
              SUM(u.idle_seconds * u.price) / 3600,
              SUM((u.allocated_seconds - u.lost_seconds) * u.price) / 3600,
              SUM((u.allocated_seconds + u.reserved_unallocated_seconds
                   - u.lost_seconds) * u.price) / 3600
       FROM billing_teamusage u JOIN gpu_requests_flavor f ON f.id = u.flavor_id
       WHERE u.team_id = %(team)s AND u.hour >= %(start)s AND u.hour < %(end)s
       GROUP BY f.slug, f.name ORDER BY f.slug""",
    # by day
    """SELECT date_trunc('day', u.hour AT TIME ZONE 'UTC'), SUM(u.allocated_seconds) / 3600.0,
              SUM(u.active_seconds) / 3600.0, SUM(u.idle_seconds) / 3600.0,
              SUM(u.unmetered_seconds) / 3600.0, SUM(u.reserved_seconds) / 3600.0,
              SUM(u.reserved_unallocated_seconds) / 3600.0,
              SUM(u.lost_seconds) / 3600.0, SUM(u.lost_seconds * u.price) / 3600,
              SUM(u.idle_seconds * u.price) / 3600,
              SUM((u.allocated_seconds - u.lost_seconds) * u.price) / 3600,
              SUM((u.allocated_seconds + u.reserved_unallocated_seconds
                   - u.lost_seconds) * u.price) / 3600
       FROM billing_teamusage u
       WHERE u.team_id = %(team)s AND u.hour >= %(start)s AND u.hour < %(end)s
       GROUP BY 1 ORDER BY 1""",
    # newest metered hour, budget
    """SELECT max(hour) FROM billing_ingestedhour
       WHERE status = 'done' AND hour >= %(start)s AND hour < %(end)s""",
    "SELECT monthly_amount FROM billing_budget WHERE team_id = %(team)s",
    # top idle workloads, with the figures the page shows
    """SELECT w.namespace, w.kind, w.name, f.slug, f.name,
              SUM(w.allocated_seconds) / 3600.0, SUM(w.active_seconds) / 3600.0,
              SUM(w.idle_seconds) / 3600.0, SUM(w.unmetered_seconds) / 3600.0,
              SUM(w.idle_seconds * w.price) / 3600 AS idle,
              SUM(w.allocated_seconds * w.price) / 3600, MAX(w.gpus), MAX(w.fb_peak_mib),
              SUM(w.activity_mean * (w.active_seconds + w.idle_seconds))
                / NULLIF(SUM(w.active_seconds + w.idle_seconds), 0)
       FROM billing_workloadusage w JOIN gpu_requests_flavor f ON f.id = w.flavor_id
       WHERE w.team_id = %(team)s AND w.hour >= %(start)s AND w.hour < %(end)s
       GROUP BY 1, 2, 3, 4, 5 ORDER BY idle DESC, 1, 2, 3, 4, 5 LIMIT 10""",
    # hourly activity of the top five (the page's utilisation charts)
    """SELECT namespace, kind, name, hour, activity_mean FROM billing_workloadusage
       WHERE team_id = %(team)s AND hour >= %(start)s AND hour < %(end)s
         AND name IN ('job-0', 'job-1', 'job-2') ORDER BY hour""",
]

RAW_ADMIN = [
    """SELECT t.slug, SUM(u.allocated_seconds) / 3600.0, SUM(u.active_seconds) / 3600.0,
              SUM(u.idle_seconds) / 3600.0, SUM(u.unmetered_seconds) / 3600.0,
              SUM(u.reserved_seconds) / 3600.0, SUM(u.reserved_unallocated_seconds) / 3600.0,
              SUM(u.lost_seconds) / 3600.0, SUM(u.lost_seconds * u.price) / 3600,
              SUM(u.idle_seconds * u.price) / 3600,
              SUM((u.allocated_seconds - u.lost_seconds) * u.price) / 3600 AS c,
              SUM((u.allocated_seconds + u.reserved_unallocated_seconds - u.lost_seconds)
                  * u.price) / 3600,
              b.monthly_amount
       FROM billing_teamusage u JOIN gpu_requests_team t ON t.id = u.team_id
       LEFT JOIN billing_budget b ON b.team_id = t.id
       WHERE u.hour >= %(start)s AND u.hour < %(end)s
       GROUP BY t.id, t.slug, t.name, b.monthly_amount ORDER BY c DESC, t.name""",
    """SELECT SUM(capacity_seconds), SUM(team_allocated_seconds),
              SUM(team_reserved_unallocated_seconds), SUM(other_allocated_seconds),
              SUM(batch_set_aside_unused_seconds), SUM(unreserved_seconds), SUM(active_seconds),
              SUM(capacity_seconds * price), SUM(team_allocated_seconds * price),
              SUM(team_reserved_unallocated_seconds * price), SUM(other_allocated_seconds * price),
              SUM(batch_set_aside_unused_seconds * price), SUM(unreserved_seconds * price)
       FROM billing_flavorhour WHERE hour >= %(start)s AND hour < %(end)s""",
    """SELECT f.slug, date_trunc('day', h.hour AT TIME ZONE 'UTC'), SUM(h.capacity_seconds),
              SUM(h.team_allocated_seconds + h.other_allocated_seconds), SUM(h.active_seconds)
       FROM billing_flavorhour h JOIN gpu_requests_flavor f ON f.id = h.flavor_id
       WHERE h.hour >= %(start)s AND h.hour < %(end)s GROUP BY 1, f.name, 2 ORDER BY 1, 2""",
]


def raw(statements, params):
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement, params)
            cursor.fetchall()


def showback(days):
    month = reports.Month.parse(f"{START + timedelta(days=days - 15):%Y-%m}")
    team = Team.objects.order_by("pk")[len(Team.objects.all()) // 2]
    params = {"team": team.pk, "start": month.start, "end": month.end}

    def team_page():
        reports.team_figures(team, month)

    def admin_page():
        reports.admin_teams(month)
        reports.queries.cluster_totals(month.start, month.end)
        list(reports.queries.flavor_utilisation(month.start, month.end))

    for name, ours, theirs, goal in (
        ("team page", team_page, lambda: raw(RAW_TEAM, params), 1.2),
        ("admin month", admin_page, lambda: raw(RAW_ADMIN, params), 1.5),
    ):
        ours()  # warm the cache once each
        theirs()
        with CaptureQueriesContext(connection) as captured:
            ours()
        (best, median), (raw_best, raw_median) = side_by_side(ours, theirs)
        print(
            f"{name:12s} ours {best * 1000:7.1f} ms (median {median * 1000:.1f}), "
            f"raw GROUP BY {raw_best * 1000:7.1f} ms (median {raw_median * 1000:.1f}): "
            f"{best / raw_best:.2f}x (goal <= {goal}x), {len(captured)} queries"
        )
        reset_queries()


def ingestion(gpus):
    from tests.billing import history
    from tests.billing.promserver import load_openmetrics, running_prometheus

    hour = datetime(2026, 11, 2, 10, tzinfo=UTC)
    flavor = Flavor.objects.get(slug="h100")
    Flavor.objects.exclude(pk=flavor.pk).update(resource_name="nvidia.com/other")
    nodes, pods = [], []
    for n in range(gpus // 8):
        node = f"gpu-{n}"
        nodes.append(history.Node(node, "H100", {"nvidia_com_gpu": 8}))
        for gpu in range(8):
            activity = history.constant(0.02 if gpu % 3 == 0 else 0.9)
            pods.append(
                history.Pod(
                    f"team-{(n * 8 + gpu) % 200}",
                    f"p-{n}-{gpu}",
                    node,
                    "nvidia_com_gpu",
                    1,
                    hour,
                    hour + timedelta(hours=1),
                    devices=[history.Device(gpu, activity)],
                    owner=("Job", f"job-{n}"),
                )
            )
    with tempfile.TemporaryDirectory(prefix="billing-bench-") as directory:
        began = time.perf_counter()
        text = history.openmetrics(nodes, pods, hour, hour + timedelta(hours=1))
        load_openmetrics(text, directory)
        print(f"history of {gpus} GPUs loaded in {time.perf_counter() - began:.0f} s")
        with running_prometheus(directory) as url:
            from django.conf import settings

            settings.PORTAL_PROMETHEUS_URL = url
            flavors = list(Flavor.objects.all())
            metering.fetch_hour(hour, flavors)  # warm Prometheus' caches
            fetch_best, fetch_median = best_of(lambda: metering.fetch_hour(hour, flavors), 3)

            def ingest():
                IngestedHour.objects.filter(hour=hour).update(digest="")
                actions.ingest_hour(hour)

            ingest()
            ingest_best, ingest_median = best_of(ingest, 3)
            rows = TeamUsage.objects.filter(hour=hour).count()
            print(
                f"ingest one hour, {gpus} GPUs: {ingest_best * 1000:.0f} ms "
                f"(median {ingest_median * 1000:.0f}), PromQL alone {fetch_best * 1000:.0f} ms "
                f"(median {fetch_median * 1000:.0f}): {ingest_best / fetch_best:.2f}x "
                f"(goal <= 2x); {rows} team rows"
            )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--gpus", type=int, default=2000)
    parser.add_argument("--skip-ingestion", action="store_true")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("Set DATABASE_URL to a PostgreSQL database (it is filled and kept).")
    call_command("migrate", "--noinput", verbosity=0)
    fill(args.teams, args.days)
    showback(args.days)
    if not args.skip_ingestion:
        ingestion(args.gpus)


if __name__ == "__main__":
    main()
