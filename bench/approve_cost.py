"""What one approval through the API costs the web process: CPU, wall time, queries.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_perfbench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \
        .venv/bin/python bench/approve_cost.py [--approvals 40]

PostgreSQL (the database named in DATABASE_URL is dropped and created; its
name must contain "bench") and the Redis database CELERY_BROKER_URL names
(flushed: the approvals queue their work there, no worker takes it). The data
is daily_pages' 2,000 requests of 200 teams, every team and the admins with a
webhook, so each approval records two deliveries as in production; the teams that
hold quota have their sync row, as every team approved through the actions does.

Each approval is `POST /api/v1/quota-requests/<pk>/approve/` with a token,
through Django's test client in this process, committed (its on-commit work
runs inside the request as under gunicorn: what it hands to workers, the
decision email, the webhook deliveries and the team's sync, is queued there,
and the bench checks that the email was queued and none was rendered inline).
Beside each, in the same loop, `GET /healthz` (a view that touches nothing) as
the yardstick of the machine's load at that moment. Prints the median, min and
max of the approval's CPU time, its ratio to the yardstick's, its wall time
and its query count. Goal (issue 22): at most 12 queries and about 10 ms of
web CPU.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.daily_pages import populate, recreate_database  # noqa: E402


def say(text):
    print(text, file=sys.stderr, flush=True)


def cpu(call):
    """(CPU seconds, wall seconds, result) of call()."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    result = call()
    return time.process_time() - cpu_start, time.perf_counter() - wall_start, result


def summary(values, scale=1000):
    values = sorted(v * scale for v in values)
    return f"{statistics.median(values):7.2f} ({values[0]:.2f}-{values[-1]:.2f})"


def _queued_tasks(client):
    """{task name: messages waiting} in the broker's default queue (no worker runs)."""
    import json

    counts = {}
    for body in client.lrange("celery", 0, -1):
        name = json.loads(body)["headers"]["task"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--approvals", type=int, default=40)
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        default=0,
        help="also print the N functions with most cumulative time over the measured "
        "approvals (cProfile: slows them, so the figures of that run are not the bench's)",
    )
    parser.add_argument(
        "--queries",
        action="store_true",
        help="also print the SQL statements of the last approval measured",
    )
    args = parser.parse_args()
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://") or not broker.rstrip("/").rsplit("/", 1)[-1].isdigit():
        sys.exit("CELERY_BROKER_URL must name a Redis database the bench may flush")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)
    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    os.environ["PORTAL_API_RATE_USER"] = "100000/min"
    os.environ["PORTAL_LOG_LEVEL"] = "WARNING"
    import redis

    redis.Redis.from_url(broker).flushdb()
    say("populating 2,000 requests ...")
    recreate_database(os.environ.get("DATABASE_URL", ""))
    import django

    django.setup()
    from django.core import mail
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from rest_framework.authtoken.models import Token

    from gpu_requests import capacity
    from gpu_requests.models import QuotaRequest
    from notifications.models import Webhook
    from provisioning.models import TeamSync
    from teams.models import Team

    setup_test_environment()  # mail.outbox for the locmem backend
    reviewer = populate(2000)
    # populate() writes its approvals directly; a team approved through the actions has
    # its sync row (provisioning's outbox) from then on, so the teams that hold quota
    # get theirs: an approval marks it with one UPDATE, as in production. A team's
    # very first approval also makes the row (two statements more).
    held = QuotaRequest.objects.exclude(status__in=["pending", "rejected", "cancelled"])
    TeamSync.objects.bulk_create(
        TeamSync(team_id=team_id, generation=1, synced_generation=1, status="in_sync")
        for team_id in set(held.values_list("team_id", flat=True))
    )
    Webhook.objects.bulk_create(
        Webhook(team=team, url=f"https://hooks.example.com/{team.pk if team else 0}", secret="x")
        for team in [None, *Team.objects.all()]
    )
    token = Token.objects.create(user=reviewer).key
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    pending = list(
        QuotaRequest.objects.filter(status="pending").select_related("flavor").order_by("pk")
    )
    views = capacity.capacity_views(pending)
    # Requests of different flavors in turn, each fitting when the run starts.
    fitting = [r for r in pending if views[r.pk].fits][: args.approvals * 2]

    client.get("/healthz")  # warm: imports, URL resolver, templates
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, as the figures
    approvals, yardstick, queries = [], [], []
    done = 0
    for quota_request in fitting:
        if done == args.approvals:
            break
        url = f"/api/v1/quota-requests/{quota_request.pk}/approve/"
        yardstick.append(cpu(lambda: client.get("/healthz"))[0])
        if profiler and done:
            profiler.enable()
        with CaptureQueriesContext(connection) as captured:
            spent, wall, response = cpu(
                lambda url=url: client.post(url, {"reason": "ok"}, content_type="application/json")
            )
        if profiler:
            profiler.disable()
        if response.status_code == 409:  # full by now: an earlier approval took the room
            continue
        assert response.status_code == 200, (response.status_code, response.content[:300])
        done += 1
        if done == 1:
            continue  # the first approval warms the serialisers and templates
        approvals.append((spent, wall))
        queries.append(len(captured))
        statements = [query["sql"] for query in captured.captured_queries]
    assert not mail.outbox, "a decision email was rendered in the request"
    queued = _queued_tasks(redis.Redis.from_url(broker))
    assert queued.get("gpu_requests.send_decision", 0) >= done, queued  # one per approval
    redis.Redis.from_url(broker).flushdb()
    connection.close()

    ratios = [a / y for (a, _), y in zip(approvals, yardstick[1:], strict=False)]
    print(f"approvals measured: {len(approvals)} (median, min-max)")
    print(f"approval, web CPU ms      {summary([a for a, _ in approvals])}")
    print(f"approval, wall ms         {summary([w for _, w in approvals])}")
    print(f"/healthz, web CPU ms      {summary(yardstick)}")
    print(f"approval / healthz CPU    {summary(ratios, 1)}x")
    low, high = min(queries), max(queries)
    print(f"approval, SQL queries     {statistics.median(queries):7.0f} ({low}-{high})")
    if args.queries:
        for number, sql in enumerate(statements, 1):
            print(f"{number:3d}. {sql[:160]}")
    if profiler:
        import pstats

        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
