"""How long after an approval its quota is on the cluster, against a bare apply.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench_approve \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \
        .venv/bin/python bench/approve_latency.py [--teams 10] [--rounds 40]

Needs Redis (the database CELERY_BROKER_URL names is flushed) and uses DATABASE_URL
as bench/provision_500.py does (a PostgreSQL database whose name starts with
portal_bench is dropped and re-created; else a fresh SQLite file). A fresh kubesim
and one real Celery worker (solo pool, as in production's one process per core).

Each team has had quota approved before and is in sync (its namespace and objects
exist), as a team asking again is. Then, in turn for each round:

- bare apply: the client applies a ResourceQuota (a new GPU figure each time) to
  a namespace of its own, as the worker's one PATCH would; timed from the call to
  the moment a watch of ResourceQuotas in this process sees the new figure;
- approval: `POST /api/v1/quota-requests/<pk>/approve/` (Django's test client in
  this process, committed: its on-commit work runs inside the request) of a
  pending request of the next team that starts now; timed from the request to
  the moment the same watch sees the team's quota with the new figure. Also
  timed from the response (the web request's part left out).

Prints p50 and p95 of each and the ratios approval / bare apply. Goal (issue 22):
at most 2x at p50 and p95.
"""

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provision_500 import (  # noqa: E402
    load_average,
    say,
    setup_django,
    start_kubesim,
    start_workers,
    stop_workers,
    wait_until,
)

BARE_NAMESPACE = "bare-apply"
RESOURCE = "nvidia.com/gpu"


class QuotaWatch:
    """A watch of every ResourceQuota, in a thread: {namespace: [(seen at, hard)]}."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.seen = {}
        self.changed = threading.Condition()
        _, version = cluster.list_versioned("ResourceQuota")
        self.response = self._open(version)
        threading.Thread(target=self._read, daemon=True).start()

    def _open(self, version):
        client = self.cluster.api_client
        query = f"watch=true&resourceVersion={version}&timeoutSeconds=3600"
        method, url, headers, body, _ = client.param_serialize(
            method="GET",
            resource_path=f"/api/v1/resourcequotas?{query}",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        return client.call_api(method, url, header_params=headers, _request_timeout=3700).response

    def _read(self):
        with contextlib.suppress(Exception):  # the stream ends with kubesim, at the end
            self._read_events()

    def _read_events(self):
        buffer = b""
        for chunk in self.response.stream(4096, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                at = time.perf_counter()
                event = json.loads(line)
                obj = event.get("object") or {}
                namespace = (obj.get("metadata") or {}).get("namespace")
                hard = (obj.get("spec") or {}).get("hard") or {}
                with self.changed:
                    self.seen.setdefault(namespace, []).append((at, hard))
                    self.changed.notify_all()

    def wait_for(self, namespace, key, value, timeout=30):
        """When the watch saw `namespace`'s quota with hard[key] == value."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for at, hard in self.seen.get(namespace, []):
                    if hard.get(key) == value:
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"{namespace}: {key}={value} not seen in {timeout}s")
                self.changed.wait(left)


def percentile(values, fraction):
    values = sorted(values)
    return values[min(len(values) - 1, round(fraction * (len(values) - 1)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--teams", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    import os

    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    os.environ["PORTAL_API_RATE_USER"] = "100000/min"
    os.environ["PORTAL_LOG_LEVEL"] = "WARNING"
    workdir = tempfile.mkdtemp(prefix="approve-latency-")
    kubesim, _, kubeconfig = start_kubesim(workdir, "kubesim")
    os.environ["PORTAL_KUBECONFIG"] = kubeconfig
    workers = []
    try:
        setup_django(workdir)
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.utils import timezone
        from rest_framework.authtoken.models import Token

        from cluster import kube
        from cluster.models import Flavor
        from gpu_requests import actions
        from gpu_requests.models import QuotaRequest
        from provisioning import manifests
        from provisioning.models import TeamSync
        from teams.models import Membership, Team
        from teams.namespaces import namespace_of

        setup_test_environment()  # locmem mail in this process
        cluster = kube.Cluster(kube.load_configuration(kubeconfig), timeout=10)
        flavor = Flavor.objects.create(
            slug="h100",
            name="H100 80GB",
            gpu_model="NVIDIA H100 80GB HBM3",
            memory_gb=80,
            resource_name=RESOURCE,
            capacity=1_000_000,
            price_per_gpu_hour=Decimal("4.0000"),
        )
        User = get_user_model()
        reviewer = User.objects.create_superuser("bench-admin", "admin@example.com", "x")
        teams = []
        for n in range(args.teams):
            team = Team.objects.create(name=f"Team {n}", slug=f"team-{n}")
            member = User.objects.create_user(f"member-{n}", f"m{n}@example.com", "x")
            Membership.objects.create(team=team, user=member)
            teams.append((team, member))

        def submit(team, member, gpus):
            now = timezone.now()
            return actions.submit(
                team=team,
                flavor=flavor,
                gpus=gpus,
                starts_at=now,
                ends_at=now + timedelta(days=30),
                justification="bench",
                by=member,
            )

        workers = start_workers(workdir, 1, kubeconfig)
        say(f"{args.teams} teams: a first approval each, synced by the worker ...")
        for team, member in teams:
            actions.approve(submit(team, member, 1), by=reviewer)
        wait_until(
            lambda: TeamSync.objects.filter(status="in_sync").count() == len(teams), timeout=120
        )
        cluster.apply(manifests.namespace(BARE_NAMESPACE), field_manager="bench")
        watch = QuotaWatch(cluster)
        key = f"requests.{RESOURCE}"
        totals = {team.pk: 1 for team, _ in teams}
        client = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=reviewer).key}")
        client.get("/healthz")
        bare, from_request, from_response = [], [], []
        say(f"{args.rounds} rounds (load average {load_average()}) ...")
        for round_ in range(args.rounds + 1):
            # Bare: the quota object alone, applied by the client.
            quota = manifests.resource_quota(BARE_NAMESPACE, "bare", {RESOURCE: 100 + round_})
            start = time.perf_counter()
            cluster.apply(quota, field_manager="bench")
            seen = watch.wait_for(BARE_NAMESPACE, key, str(100 + round_))
            if round_:
                bare.append(seen - start)
            # Approval of the next team's pending request, through the API.
            team, member = teams[round_ % len(teams)]
            pending = submit(team, member, 1)
            totals[team.pk] += 1
            start = time.perf_counter()
            response = client.post(
                f"/api/v1/quota-requests/{pending.pk}/approve/",
                {"reason": "ok"},
                content_type="application/json",
            )
            answered = time.perf_counter()
            assert response.status_code == 200, (response.status_code, response.content[:300])
            namespace = namespace_of(team.slug)
            seen = watch.wait_for(namespace, key, str(totals[team.pk]))
            if round_:  # the first round warms the serialisers and the worker
                from_request.append(seen - start)
                from_response.append(seen - answered)
        assert QuotaRequest.objects.filter(status="active").count() == len(teams) + args.rounds + 1
    finally:
        stop_workers(workers)
        kubesim.terminate()
        kubesim.wait(timeout=30)

    def line(name, values, base=None):
        p50, p95 = percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000
        text = f"{name:38s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms"
        if base:
            text += (
                f"   {p50 / (percentile(base, 0.5) * 1000):5.2f}x /"
                f" {p95 / (percentile(base, 0.95) * 1000):5.2f}x bare"
            )
        print(text)

    print(f"rounds measured: {len(bare)}; load average {load_average()}")
    line("bare apply, seen on the watch", bare)
    line("approval, from the request", from_request, bare)
    line("approval, from the response", from_response, bare)
    print(f"approval median, from the request: {statistics.median(from_request) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
