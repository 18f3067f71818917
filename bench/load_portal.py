"""Bounded load test of the portal as deployed: gunicorn + PostgreSQL + Redis.

Loopback only, bounded in requests and time. 200 teams (3 people each), then
concurrent clients: members browse the dashboard and their requests and
submit quota requests, admins approve them, a Celery worker syncs the teams
to a kubesim. The same clients first load a trivial view (/healthz) on the
same server: figures are printed as ratios to it. Midway, PostgreSQL is cut
for a few seconds (a TCP proxy between gunicorn and PostgreSQL drops every
connection and refuses new ones, as a restart does) and comes back: answers
in that window must be 503, none after it, and every request the portal said
it created or approved is in the database exactly once, with its audit event.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \\
      .venv/bin/python bench/load_portal.py --requests 20000 [--port N]

The Redis database is CELERY_BROKER_URL's (required); gunicorn listens on
--port, else BENCH_PORT, else a free port the system gives.
"""

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.provision_500 import broker_url, start_kubesim  # noqa: E402
from tests.ops.tcp_proxy import Proxy  # noqa: E402


def say(text):
    print(text, file=sys.stderr, flush=True)


def free_port():
    """A port nothing listens on now (the system's choice), for gunicorn to bind."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values, q):
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


class Client:
    def __init__(self, base, token=None):
        self.base = base
        self.token = token
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=headers
        )
        started = time.monotonic()
        try:
            with self.opener.open(request, timeout=30) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        except OSError:
            status, payload = 0, b""
        return status, payload, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", "0")))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--outage", type=float, default=3.0, help="seconds PostgreSQL is gone")
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()

    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal")
    parts = urlsplit(base_db)
    name = "bench_load_portal"
    db_url = urlunsplit(parts._replace(path=f"/{name}"))
    broker = broker_url()
    args.port = args.port or free_port()
    import psycopg

    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    os.environ |= {
        "DATABASE_URL": db_url,
        "CELERY_BROKER_URL": broker,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40),
        "PORTAL_API_RATE_USER": "100000/min",
        "PORTAL_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType
    from rest_framework.authtoken.models import Token

    from cluster.models import Flavor
    from gpu_requests.models import QuotaRequest
    from teams import access
    from teams.models import AuditEvent, Membership, Team

    say(f"seeding {args.teams} teams")
    User = get_user_model()
    Flavor.objects.create(
        slug="h100", name="H100", gpu_model="NVIDIA-H100-80GB-HBM3", resource_name="nvidia.com/gpu",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        capacity=100000, price_per_gpu_hour="4.0000", memory_gb=80,
    )  # fmt: skip
    teams = Team.objects.bulk_create(
        Team(slug=f"team-{i:03d}", name=f"Team {i}") for i in range(args.teams)
    )
    users = User.objects.bulk_create(
        User(username=f"u{i:03d}-{j}", password="!") for i in range(args.teams) for j in range(3)
    )
    Membership.objects.bulk_create(
        Membership(team=teams[k // 3], user=user, role="manager" if k % 3 == 0 else "member")
        for k, user in enumerate(users)
    )
    admin = User.objects.create_user("bench-admin", password="bench-admin-password", is_staff=True)
    admin.user_permissions.add(access.review_permission())
    tokens = {
        t.user_id: t.key
        for t in Token.objects.bulk_create(Token(user=u, key=Token.generate_key()) for u in users)
    }
    admin_token = Token.objects.create(user=admin).key
    members = [(teams[k // 3].slug, tokens[user.pk], user.username) for k, user in enumerate(users)]

    workdir = tempfile.mkdtemp(prefix="bench-load-")
    sim, _, kubeconfig = start_kubesim(workdir, "load")
    proxy = Proxy((parts.hostname, parts.port or 5432))
    proxy.start()
    proxied = urlunsplit(
        parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}", path=f"/{name}")
    )
    env = {
        **os.environ,
        "DATABASE_URL": proxied,
        "PORTAL_KUBECONFIG": kubeconfig,
        "GUNICORN_BIND": f"127.0.0.1:{args.port}",
        "GUNICORN_WORKERS": str(args.workers),
        "GUNICORN_THREADS": str(args.threads),
        "PROMETHEUS_MULTIPROC_DIR": f"{workdir}/metrics",
    }
    log = open(f"{workdir}/processes.log", "w")  # noqa: SIM115 - lives as long as they do
    celery = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--concurrency=2"]
    web, worker = (
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        for command in ([sys.executable, "-m", "gunicorn", "portal.wsgi:application"], celery)
    )
    base = f"http://127.0.0.1:{args.port}"
    deadline = time.monotonic() + 30
    while Client(base).call("GET", "/healthz")[0] != 200:
        if time.monotonic() > deadline:
            raise SystemExit(f"gunicorn did not start; see {workdir}/processes.log")
        time.sleep(0.2)

    # PostgreSQL connections of the bench database, sampled through the run.
    peak_connections = [0]
    stop_sampling = threading.Event()

    def sample():
        with psycopg.connect(admin_url, autocommit=True) as conn:
            while not stop_sampling.wait(0.2):
                [(n,)] = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]
                ).fetchall()
                peak_connections[0] = max(peak_connections[0], n)

    threading.Thread(target=sample, daemon=True).start()
    run_deadline = time.monotonic() + args.max_seconds

    def run(task, count):
        latencies, statuses, stamps = defaultdict(list), defaultdict(Counter), []
        lock = threading.Lock()

        def one(i):
            if time.monotonic() > run_deadline:
                return
            kind, status, seconds = task(i)
            if status == 503:
                time.sleep(0.5)  # a client backing off (Retry-After, shortened)
            with lock:
                latencies[kind].append(seconds)
                statuses[kind][status] += 1
                stamps.append((time.monotonic(), kind, status))

        started = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(one, range(count)))
        return latencies, statuses, stamps, time.monotonic() - started

    trivial = Client(base)
    say("baseline: /healthz")
    base_lat, base_status, _, base_seconds = run(
        lambda i: ("healthz", *Client.call(trivial, "GET", "/healthz")[::2]), args.requests // 4
    )

    created, approved = [], []
    created_lock = threading.Lock()
    outage = {}

    def back():
        proxy.start()
        outage["end"] = time.monotonic()

    def mixed(i):
        if i == args.requests * 2 // 5 and not outage:
            outage["start"] = time.monotonic()
            proxy.stop()
            threading.Timer(args.outage, back).start()
        slug, token, _ = random.choice(members)
        roll = random.random()
        if roll < 0.45:
            status, _, seconds = Client(base, token).call("GET", f"/api/v1/teams/{slug}/")
            return "team", status, seconds
        if roll < 0.75:
            query = urlencode({"team": slug, "limit": 20})
            status, _, seconds = Client(base, token).call("GET", f"/api/v1/quota-requests/?{query}")
            return "list", status, seconds
        if roll < 0.9:
            starts = time.time() + 7 * 86400 + random.randint(0, 86400)
            body = {
                "team": slug, "flavor": "h100", "gpus": random.randint(1, 4),
                "starts_at": time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(starts)),
                "ends_at": time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(starts + 86400)),
                "justification": "load test",
            }  # fmt: skip
            status, payload, seconds = Client(base, token).call(
                "POST", "/api/v1/quota-requests/", body
            )
            if status == 201:
                with created_lock:
                    created.append(json.loads(payload)["id"])
            return "submit", status, seconds
        with created_lock:
            pk = created[random.randrange(len(created))] if created else None
        if pk is None:
            return "approve", 409, 0.0
        status, _, seconds = Client(base, admin_token).call(
            "POST", f"/api/v1/quota-requests/{pk}/approve/", {}
        )
        if status == 200:
            with created_lock:
                approved.append(pk)
        return "approve", status, seconds

    say(f"mixed load: {args.requests} requests, {args.clients} clients, PostgreSQL cut at 40%")
    lat, status, stamps, seconds = run(mixed, args.requests)
    time.sleep(2)
    web.terminate()
    worker.terminate()
    web.wait(30)
    worker.wait(30)
    stop_sampling.set()
    proxy.stop()
    sim.terminate()

    # Nothing the portal confirmed (201, 200) is missing; nothing is there twice:
    # one submit event per request, one approve event per approved request.
    lost_or_doubled = []
    if QuotaRequest.objects.filter(pk__in=created).count() != len(set(created)):
        lost_or_doubled.append("a created request is missing")
    in_db = set(
        QuotaRequest.objects.filter(status__in=["approved", "active"]).values_list("pk", flat=True)
    )
    if not set(approved) <= in_db:
        lost_or_doubled.append("an approval answered 200 is missing")
    per_request = Counter(
        AuditEvent.objects.filter(
            subject_type=ContentType.objects.get_for_model(QuotaRequest),
            action__in=["submit", "approve"],
        ).values_list("subject_id", "action")
    )
    if any(n > 1 for n in per_request.values()):
        lost_or_doubled.append("an audit event is doubled")
    if sum(1 for (_, action) in per_request if action == "approve") != len(in_db):
        lost_or_doubled.append("an approval has no audit event")
    # Committed, but the answer was lost with the connection (503): a retry
    # gets 409 (not pending any more), never a second approval.
    unconfirmed = len(in_db - set(approved))

    outage_start, outage_end = outage.get("start"), outage.get("end")
    errors = Counter()
    during = Counter()
    for when, kind, code in stamps:
        in_outage = outage_start and outage_start <= when <= (outage_end or when) + 1.0
        expected = code in (200, 201) or (kind == "approve" and code == 409)
        if in_outage and code == 503:
            during[kind] += 1
        elif not expected:
            errors[(kind, code)] += 1

    base_rps = len(base_lat["healthz"]) / base_seconds
    base_p = {q: percentile(base_lat["healthz"], q) for q in (50, 95, 99)}
    total = sum(len(v) for v in lat.values())
    print(
        f"\n{total} mixed requests in {seconds:.1f}s with {args.clients} clients; gunicorn {args.workers}x{args.threads}"  # noqa: E501
    )
    print(
        f"trivial view /healthz: {base_rps:.0f} req/s, p50 {base_p[50] * 1000:.1f} ms, p95 {base_p[95] * 1000:.1f} ms, p99 {base_p[99] * 1000:.1f} ms\n"  # noqa: E501
    )
    print("| requests | count | req/s (x /healthz) | p50 (x) | p95 (x) | p99 (x) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    all_lat = [s for v in lat.values() for s in v]
    for kind, values in [*sorted(lat.items()), ("all", all_lat)]:
        rps = len(values) / seconds
        ps = [percentile(values, q) for q in (50, 95, 99)]
        cells = " | ".join(
            f"{p * 1000:.1f} ms ({p / base_p[q]:.1f}x)"
            for p, q in zip(ps, (50, 95, 99), strict=True)
        )
        print(f"| {kind} | {len(values)} | {rps:.0f} ({rps / base_rps:.2f}x) | {cells} |")
    print(f"\nstatus codes: { {k: dict(v) for k, v in status.items()} }")
    print(
        f"PostgreSQL gone {args.outage:.0f}s: 503 answers then {dict(during)}; errors outside it: {dict(errors) or 0}"  # noqa: E501
    )
    print(
        f"peak PostgreSQL connections of the bench database: {peak_connections[0]} (web {args.workers}x{args.threads} + worker 2 + bench 1)"  # noqa: E501
    )
    print(f"approvals committed but answered 503 (connection lost after COMMIT): {unconfirmed}")
    print(
        f"lost or doubled: {lost_or_doubled or 'none'}; {len(created)} created, {len(set(approved))} approved"  # noqa: E501
    )
    return 1 if errors or lost_or_doubled else 0


if __name__ == "__main__":
    raise SystemExit(main())
