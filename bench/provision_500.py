"""Provision N teams from scratch with two Celery workers, on kubesim or on the real
API server (controlplane/, with KWOK GPU nodes).

    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \
      .venv/bin/python bench/provision_500.py [--teams 500] [--workers 2] \
      [--backend kubesim|kubernetes] [--nodes 1000]

Needs Redis: the database CELERY_BROKER_URL names (flushed at the start). Uses
DATABASE_URL if set (a PostgreSQL database whose name starts with portal_bench
is dropped and re-created, so runs repeat), else a fresh SQLite file. Every
process binds loopback only; each wait is bounded. Prints the figures
docs/benchmarks.md records under "Provisioning 500 teams":

1. bare loop: the same objects applied with the client directly, one process,
   one call per object: the floor to compare against. On kubesim a fresh
   kubesim; on the real API server the same cluster the portal then uses, the
   objects of every team under a `bare-` namespace (so the portal still
   creates every object: the same server-side apply calls, on a cluster of
   the same size);
2. cold: every team marked in the database, one sweep, two workers, until all
   are in sync; API calls per team from kubesim's request log or the API
   server's audit log; CPU of the client side (the bare loop's process; the
   workers and the sweep) and of the server (kubesim; kube-apiserver and etcd);
3. steady state: the beat's sweep and drift check with nothing changed, then
   every team marked and synced again (each object read, none written).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
BACKENDS = ("kubesim", "kubernetes")


def start_kubesim(workdir, name, *options):
    kubeconfig = Path(workdir) / f"{name}.kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "kubesim", *options, "--port", "0", "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = None
    for line in process.stdout:
        if line.startswith("kubesim listening on "):
            url = line.split()[-1]
        if line.startswith("kubeconfig written"):
            break
    return process, url, str(kubeconfig)


def sim_requests(url, clear=False):
    request = urllib.request.Request(url + "/_sim/requests", method="DELETE" if clear else "GET")
    with urllib.request.urlopen(request, timeout=30) as response:
        items = json.loads(response.read())["items"]
    return [r for r in items if not r["path"].startswith("/_sim/")]


class KubesimBackend:
    """A fresh kubesim in its own process for each side (`open`), its request log."""

    name = "kubesim"

    def __init__(self, workdir, *options):
        self.workdir, self.options = workdir, options
        self.process = None

    def open(self, side):
        """A fresh server for `side`; its kubeconfig."""
        self.close()
        self.process, self.url, self.kubeconfig = start_kubesim(self.workdir, side, *self.options)
        return self.kubeconfig

    def mark(self):
        sim_requests(self.url, clear=True)

    def requests(self):
        return sim_requests(self.url)

    def server_cpu(self):
        from realcluster import cpu_seconds

        return cpu_seconds([self.process.pid])

    def close(self):
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.process = None


class KubernetesBackend:
    """One real control plane with `nodes` KWOK GPU nodes for both sides (`open`
    returns the admin's kubeconfig each time); the audit log as request log."""

    name = "kubernetes"

    def __init__(self, workdir, nodes):
        import realcluster

        self.realcluster = realcluster
        self.plane = realcluster.start(workdir, nodes)
        self.kubeconfig = str(self.plane.kubeconfig_path)
        self.audit = realcluster.AuditLog(self.plane)

    def open(self, side):
        return self.kubeconfig

    def mark(self):
        self.audit.mark()

    def requests(self):
        return self.audit.requests()

    def server_cpu(self):
        return self.realcluster.cpu_seconds(self.realcluster.server_pids(self.plane))

    def close(self):
        pass

    def stop(self):
        self.plane.stop()


def broker_url():
    """CELERY_BROKER_URL, a Redis database of the caller's choosing (the bench flushes it)."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    parts = urlsplit(broker)
    if parts.scheme != "redis" or not parts.path.strip("/").isdigit():
        sys.exit(
            "CELERY_BROKER_URL must name a Redis database the bench may flush, "
            "e.g. redis://127.0.0.1:6379/14"
        )
    return broker


def setup_django(workdir, *, broker=True):
    """CELERY_BROKER_URL's Redis database (flushed) as the broker; DATABASE_URL
    (portal_bench* re-created) or a fresh SQLite file, migrated; then
    django.setup() in this process. `broker=False`: no Celery worker takes part."""
    if broker:
        import redis

        redis.Redis.from_url(broker_url()).flushdb()
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/portal.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)
    database = urlsplit(os.environ["DATABASE_URL"])
    name = database.path.lstrip("/")
    if database.scheme in ("postgres", "postgresql") and name.startswith("portal_bench"):
        admin = ["psql", "-q", "-h", database.hostname or "127.0.0.1"]
        admin += ["-U", database.username or "postgres", "-p", str(database.port or 5432)]
        admin += ["-d", "postgres", "-c"]
        subprocess.run([*admin, f'DROP DATABASE IF EXISTS "{name}"'], check=True)
        subprocess.run([*admin, f'CREATE DATABASE "{name}"'], check=True)
    say("migrating")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ
    )

    import django

    django.setup()


def start_workers(workdir, count, kubeconfig, *options):
    """`count` Celery workers (solo pool) using `kubeconfig`; their logs in `workdir`."""
    env = {**os.environ, "PORTAL_KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"}
    workers = []
    for n in range(count):
        log = open(Path(workdir) / f"worker-{n}.log", "w")  # noqa: SIM115
        workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo"]
                + [f"--hostname=bench{n}@%h", "--without-gossip", "--without-mingle"]
                + ["--without-heartbeat", "--loglevel=WARNING", *options],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return workers


def wait_ready(count):
    """Until `count` workers answer a ping: booted, connected, waiting for work."""
    from portal.celery import app

    wait_until(lambda: len(app.control.ping(timeout=1)) >= count, timeout=120)


def stop_workers(workers):
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def say(text):
    print(text, file=sys.stderr, flush=True)


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout}s")
        time.sleep(0.05)


def load_average():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", choices=BACKENDS, default="kubesim")
    parser.add_argument(
        "--nodes", type=int, default=1000, help="KWOK GPU nodes (8 GPUs each), kubernetes only"
    )
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-provision-")

    setup_django(workdir)
    from django.db import connection

    os.environ["PORTAL_KUBE_RETRIES"] = "2"
    from decimal import Decimal

    from django.utils import timezone

    from cluster import kube
    from cluster.models import Flavor
    from gpu_requests.models import QuotaRequest
    from provisioning import actions, desired
    from provisioning.models import TeamSync
    from teams.models import Team

    flavor = Flavor.objects.create(
        slug="l4",
        name="L4",
        gpu_model="NVIDIA-L4",
        memory_gb=24,
        resource_name="nvidia.com/gpu",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"},
        capacity=100_000,
        price_per_gpu_hour=Decimal("1.0000"),
    )
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create(username="bench")
    now = timezone.now()
    teams = Team.objects.bulk_create(
        Team(slug=f"team-{n:04d}", name=f"Team {n:04d}") for n in range(args.teams)
    )
    QuotaRequest.objects.bulk_create(
        QuotaRequest(
            team=team,
            flavor=flavor,
            gpus=1 + n % 4,
            starts_at=now,
            justification="bench",
            requested_by=user,
            status=QuotaRequest.Status.ACTIVE,
        )
        for n, team in enumerate(teams)
    )
    team_ids = [team.pk for team in teams]
    states = desired.desired_states(team_ids)

    if args.backend == "kubernetes":
        backend = KubernetesBackend(workdir, args.nodes)
        for state in states.values():
            # The same objects under other names: the portal's own still do not exist.
            state.slug = f"bare-{state.slug}"
    else:
        backend = KubesimBackend(workdir)
    workers = []
    try:
        say(f"{len(team_ids)} teams in the database; bare loop (load {load_average()})")
        # 1. The floor: apply every object once, directly.
        kubeconfig = backend.open("bare")
        client = kube.Cluster(kube.load_configuration(kubeconfig), timeout=30)
        backend.mark()
        server_before, started = backend.server_cpu(), time.monotonic()
        cpu_before = time.process_time()
        for team_id in team_ids:
            for obj in states[team_id].objects():
                client.apply(obj, field_manager="bench")
        bare_seconds = time.monotonic() - started
        bare_cpu = time.process_time() - cpu_before
        bare_server_cpu = backend.server_cpu() - server_before
        bare_calls = len(backend.requests())

        say(f"bare loop: {bare_seconds:.2f}s; cold provisioning")
        # 2. Cold: the portal's path (a fresh kubesim; the same real cluster).
        kubeconfig = backend.open("portal")
        workers = start_workers(workdir, args.workers, kubeconfig)
        wait_ready(args.workers)  # their start-up is not the sync's cost
        for team_id in team_ids:
            actions.mark_dirty(team_id)
        backend.mark()
        in_sync = TeamSync.objects.filter(team_id__in=team_ids, status=TeamSync.Status.IN_SYNC)

        from realcluster import cpu_seconds

        worker_pids = [worker.pid for worker in workers]
        workers_before, server_before = cpu_seconds(worker_pids), backend.server_cpu()
        started, cpu_before = time.monotonic(), time.process_time()
        actions.sweep()
        cold_sweep_seconds = time.monotonic() - started
        sweep_cpu = time.process_time() - cpu_before
        wait_until(lambda: in_sync.count() == len(team_ids), timeout=600)
        cold_seconds = time.monotonic() - started
        cold_cpu = cpu_seconds(worker_pids) - workers_before + sweep_cpu
        cold_server_cpu = backend.server_cpu() - server_before
        time.sleep(1 if backend.name == "kubernetes" else 0)  # the audit log's last lines
        cold = backend.requests()
        cold_writes = sum(r["method"] in WRITE_METHODS for r in cold)

        say(f"cold: {cold_seconds:.2f}s; steady state")
        # 3. Steady state: nothing changed.
        backend.mark()
        started = time.monotonic()
        queued = actions.sweep()
        drifted = actions.check_drift(kube.Cluster(kube.load_configuration(kubeconfig), timeout=30))
        sweep_seconds = time.monotonic() - started
        time.sleep(1 if backend.name == "kubernetes" else 0)
        sweep_log = backend.requests()
        say(f"steady sweep: queued {len(queued)}, drifted {len(drifted)}; forced resync")

        backend.mark()
        for team_id in team_ids:
            actions.mark_dirty(team_id)
        started = time.monotonic()
        say(f"resync queued {len(actions.sweep())}")
        wait_until(lambda: in_sync.count() == len(team_ids), timeout=600)
        resync_seconds = time.monotonic() - started
        time.sleep(1 if backend.name == "kubernetes" else 0)
        resync = backend.requests()
        load = load_average()
    finally:
        stop_workers(workers)
        backend.close()
        if backend.name == "kubernetes":
            backend.stop()

    n = len(team_ids)
    figures = {
        "backend": backend.name,
        "nodes": args.nodes if backend.name == "kubernetes" else None,
        "teams": n,
        "workers": args.workers,
        "database": connection.vendor,
        "load_average_at_end": load,
        "bare_loop_seconds": round(bare_seconds, 2),
        "bare_loop_client_cpu_seconds": round(bare_cpu, 2),
        "bare_loop_server_cpu_seconds": round(bare_server_cpu, 2),
        "bare_loop_calls_per_team": round(bare_calls / n, 2),
        "cold_seconds": round(cold_seconds, 2),
        "cold_sweep_seconds": round(cold_sweep_seconds, 2),
        "cold_client_cpu_seconds": round(cold_cpu, 2),
        "cold_server_cpu_seconds": round(cold_server_cpu, 2),
        "cold_calls_per_team": round(len(cold) / n, 2),
        "cold_writes_per_team": round(cold_writes / n, 2),
        "cold_to_bare_ratio": round(cold_seconds / bare_seconds, 2),
        "cold_to_bare_client_cpu_ratio": round(cold_cpu / bare_cpu, 2),
        "cold_to_bare_server_cpu_ratio": round(cold_server_cpu / bare_server_cpu, 2),
        "steady_sweep_and_drift_check_seconds": round(sweep_seconds, 2),
        "steady_sweep_queued": len(queued),
        "steady_drift_found": len(drifted),
        "steady_sweep_api_calls": len(sweep_log),
        "steady_sweep_writes": sum(r["method"] in WRITE_METHODS for r in sweep_log),
        "forced_resync_seconds": round(resync_seconds, 2),
        "forced_resync_calls_per_team": round(len(resync) / n, 2),
        "forced_resync_writes": sum(r["method"] in WRITE_METHODS for r in resync),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
