"""The pages people open every day, and the lifecycle sweep, at 2,000 and 20,000 requests.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench_daily \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \
        .venv/bin/python bench/daily_pages.py [--sizes 2000 20000] [--runs 3]

PostgreSQL only (the database named in DATABASE_URL is dropped and created;
its name must contain "bench"); Redis: the database CELERY_BROKER_URL names.
200 teams, six flavors of 64 GPUs; the requests spread over a history that
grows with their number (a portal's history grows with time, not its
capacity), 9.3 % of them pending, approvals packed until a flavor is full.
The rows are written with bulk_create, not through the actions: this is a
fixture for timing, the tests drive the actions.

Prints, per size, min/median of `--runs` runs of each page (through Django's
test client, in process, so it is server time without the network), the
sweep's milliseconds per moved request set-based and one request at a time
(the old way, kept as `actions.activate`/`expire`), and the ratio of each
figure at the largest size to the smallest. Changes made while timing are
rolled back, so every run sees the same data.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.provision_500 import broker_url  # noqa: E402

TEAMS = 200
FLAVORS = 6
CAPACITY = 64
PENDING_SHARE = 0.093
FUTURE_DAYS = 60


def say(text):
    print(text, file=sys.stderr, flush=True)


def recreate_database(url):
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if parts.scheme not in ("postgres", "postgresql") or "bench" not in name:
        sys.exit("DATABASE_URL must name a PostgreSQL database with bench in its name")
    admin = ["psql", "-q", "-h", parts.hostname or "127.0.0.1", "-U", parts.username or "postgres"]
    admin += ["-p", str(parts.port or 5432), "-d", "postgres", "-c"]
    subprocess.run([*admin, f'DROP DATABASE IF EXISTS "{name}"'], check=True)
    subprocess.run([*admin, f'CREATE DATABASE "{name}"'], check=True)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ
    )


def populate(size, seed=12):
    """`size` requests with their submit and decision events; returns the reviewer."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from cluster.models import Flavor, default_cluster
    from gpu_requests.models import QuotaRequest
    from teams.models import AuditEvent, Membership, Team

    rng = random.Random(seed)
    User = get_user_model()
    reviewer = User.objects.create_superuser("bench-admin", "admin@example.com", "x")
    users = User.objects.bulk_create(
        User(username=f"user{i}", email=f"user{i}@example.com") for i in range(TEAMS)
    )
    teams = Team.objects.bulk_create(Team(name=f"Team {i}", slug=f"team-{i}") for i in range(TEAMS))
    Membership.objects.bulk_create(
        Membership(team=team, user=user) for team, user in zip(teams, users, strict=True)
    )
    flavors = Flavor.objects.bulk_create(
        Flavor(
            cluster_id=default_cluster(),
            name=f"Flavor {i}",
            slug=f"flavor-{i}",
            gpu_model="NVIDIA H100",
            memory_gb=80,
            resource_name=f"nvidia.com/f{i}",
            capacity=CAPACITY,
            price_per_gpu_hour=Decimal("2.5000"),
        )
        for i in range(FLAVORS)
    )
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    history = int(FUTURE_DAYS * size / 2000)  # days of past requests
    # Reserved GPUs per flavor and day from `history` days ago to FUTURE_DAYS ahead.
    reserved = [[0] * (history + FUTURE_DAYS + 30) for _ in flavors]
    Status = QuotaRequest.Status
    rows = []
    for n in range(size):
        index = rng.randrange(TEAMS)
        flavor_index = rng.randrange(FLAVORS)
        pending = n < size * PENDING_SHARE
        first = rng.randrange(1, FUTURE_DAYS) if pending else rng.randrange(-history, FUTURE_DAYS)
        days = rng.randrange(1, 15)
        gpus = rng.choice([1, 1, 2, 2, 4, 8])
        starts_at = today + timedelta(days=first)
        ends_at = starts_at + timedelta(days=days)
        span = range(first + history, first + history + days)
        fits = all(reserved[flavor_index][d] + gpus <= CAPACITY for d in span)
        if pending:
            status = Status.PENDING
        elif fits and rng.random() < 0.7:
            for d in span:
                reserved[flavor_index][d] += gpus
            if ends_at <= today:
                status = Status.EXPIRED
            elif starts_at <= today:
                status = Status.ACTIVE
            else:
                status = Status.APPROVED
        else:
            status = rng.choice([Status.REJECTED, Status.CANCELLED])
        rows.append(
            QuotaRequest(
                team=teams[index],
                flavor=flavors[flavor_index],
                gpus=gpus,
                starts_at=starts_at,
                ends_at=ends_at,
                justification=f"Training run {n}",
                requested_by=users[index],
                status=status,
                estimated_cost=Decimal(gpus * days * 24) * Decimal("2.5"),
            )
        )
    rng.shuffle(rows)  # pending rows not all first in creation order
    created = QuotaRequest.objects.bulk_create(rows, batch_size=2000)
    events = []
    for req in created:
        events.append(
            AuditEvent(
                team_id=req.team_id,
                subject=req,
                actor=req.requested_by,
                action="submit",
                to_status="pending",
            )
        )
        if req.status != Status.PENDING:
            action = {"cancelled": "cancel", "rejected": "reject"}.get(req.status, "approve")
            events.append(
                AuditEvent(
                    team_id=req.team_id,
                    subject=req,
                    actor=reviewer,
                    action=action,
                    from_status="pending",
                    to_status=req.status,
                )
            )
    AuditEvent.objects.bulk_create(events, batch_size=5000)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return reviewer


def purge_broker():
    """Drop the sync messages the committed sweep queued: no worker runs here."""
    from portal.celery import app

    with app.connection_for_write() as connection:
        app.control.purge(connection=connection)


def timed(function, runs):
    """min and median seconds of `runs` calls, each rolled back."""
    from django.db import transaction

    times = []
    for _ in range(runs):
        with transaction.atomic():
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
            transaction.set_rollback(True)
    return min(times), statistics.median(times)


def measure(size, runs):
    from django.test import Client
    from django.utils import timezone

    from gpu_requests import actions, capacity, views
    from gpu_requests.models import QuotaRequest

    reviewer = populate(size)
    client = Client()
    client.force_login(reviewer)

    def get(url, **extra):
        def call():
            response = client.get(url, **extra)
            assert response.status_code == 200, (url, response.status_code)

        return call

    first_page = list(views._pending()[: views.QUEUE_PAGE_SIZE])
    fitting = capacity.capacity_views(first_page)
    target = next(r for r in first_page if fitting[r.pk].fits)
    shown = ",".join(str(r.pk) for r in first_page)

    def approve():
        response = client.post(
            f"/requests/{target.pk}/approve/", {"shown": shown}, HTTP_HX_REQUEST="true"
        )
        assert b"approved." in response.content, response.content[:300]

    figures = {
        "review queue": timed(get("/review/"), runs),
        "approve in the queue (htmx)": timed(approve, runs),
        "dashboard, all teams": timed(get("/"), runs),
        "API list": timed(get("/api/v1/quota-requests/"), runs),
        "admin audit list": timed(get("/admin/teams/auditevent/"), runs),
    }
    if hasattr(views, "request_list"):
        figures["request list"] = timed(get("/requests/"), runs)
    # The sweep as if the beat had stopped for two weeks: the 1,347 due requests.
    later = timezone.now() + timedelta(days=14)
    due = QuotaRequest.objects.reserving().filter(ends_at__lte=later).count()
    due += (
        QuotaRequest.objects.filter(status="approved", starts_at__lte=later)
        .exclude(ends_at__lte=later)
        .count()
    )

    def one_at_a_time():
        for req in list(QuotaRequest.objects.reserving().filter(ends_at__lte=later)):
            actions.expire(req)
        for req in QuotaRequest.objects.filter(status="approved", starts_at__lte=later):
            actions.activate(req)

    set_based = timed(lambda: actions.advance_lifecycle(now=later), runs)
    old = timed(one_at_a_time, 1)
    # Once more committed, so the syncs are queued on the broker as in production
    # (the last thing measured: it changes the data).
    start = time.perf_counter()
    moved = actions.advance_lifecycle(now=later)
    committed = time.perf_counter() - start
    assert sum(moved.values()) == due, (moved, due)
    purge_broker()
    figures["sweep ms per moved request"] = tuple(1000 * t / max(due, 1) for t in set_based)
    figures["sweep, committed and queued"] = (1000 * committed / max(due, 1),) * 2
    figures["sweep ms per request, one at a time"] = tuple(1000 * t / max(due, 1) for t in old)
    pending = QuotaRequest.objects.filter(status="pending").count()
    return figures, {"requests": size, "pending": pending, "due": due}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)
    broker_url()  # the committed sweep queues its syncs there (purged at the end)
    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    import django

    results = []
    for size in args.sizes:
        say(f"populating {size} requests ...")
        recreate_database(url)
        django.setup()
        from django.db import connection

        connection.close()
        results.append(measure(size, args.runs))
        connection.close()
    print(f"{'':38}" + "".join(f"{r[1]['requests']:>20,}" for r in results) + "   ratio")
    print(
        f"{'pending / due for the sweep':38}"
        + "".join(f"{r[1]['pending']:>11,} / {r[1]['due']:>6,}" for r in results)
    )
    for name in results[0][0]:
        cells = []
        for figures, _ in results:
            low, median = figures[name]
            unit = "ms" if name.startswith("sweep") else "s"
            cells.append(f"{low:>9.3f} / {median:.3f} {unit}".rjust(20))
        ratio = results[-1][0][name][1] / results[0][0][name][1]
        print(f"{name:38}" + "".join(cells) + f"   {ratio:5.2f}x")


if __name__ == "__main__":
    main()
