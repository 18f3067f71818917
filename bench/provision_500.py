"""Provision N teams from scratch against kubesim with two Celery workers.

    .venv/bin/python bench/provision_500.py [--teams 500] [--workers 2]

Needs Redis (CELERY_BROKER_URL's host, database 14; default 127.0.0.1:6379).
Uses DATABASE_URL if set, else a fresh SQLite file. Prints the figures that
docs/benchmarks.md records under "Provisioning 500 teams":

1. bare loop: the same objects applied with the client directly, one process,
   one call per object, on a fresh kubesim: the floor to compare against;
2. cold: every team marked in the database, one sweep, two workers, until all
   are in sync; API calls per team from kubesim's request log;
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
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


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


def setup_django(workdir):
    """Redis database 14 (flushed) as the broker, DATABASE_URL or a fresh SQLite
    file, migrated; then django.setup() in this process."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    netloc = urlsplit(broker).netloc if broker.startswith("redis://") else "127.0.0.1:6379"
    os.environ["CELERY_BROKER_URL"] = broker = f"redis://{netloc}/14"
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/portal.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)

    import redis

    redis.Redis.from_url(broker).flushdb()
    say("migrating")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ
    )

    import django

    django.setup()


def say(text):
    print(text, file=sys.stderr, flush=True)


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout}s")
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-provision-")

    setup_django(workdir)
    from django.db import connection

    os.environ["PORTAL_KUBE_RETRIES"] = "2"
    from decimal import Decimal

    from django.utils import timezone

    from cluster import kube
    from gpu_requests.models import Flavor, QuotaRequest, Team
    from provisioning import actions, desired
    from provisioning.models import TeamSync

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

    say(f"{len(team_ids)} teams in the database; bare loop")
    # 1. The floor: apply every object once, directly, on a fresh kubesim.
    sim, url, kubeconfig = start_kubesim(workdir, "bare")
    try:
        client = kube.Cluster(kube.load_configuration(kubeconfig), timeout=10)
        started = time.monotonic()
        for team_id in team_ids:
            for obj in states[team_id].objects():
                client.apply(obj, field_manager="bench")
        bare_seconds = time.monotonic() - started
        bare_calls = len(sim_requests(url))
    finally:
        sim.terminate()
        sim.wait()

    say(f"bare loop: {bare_seconds:.2f}s; cold provisioning")
    # 2. Cold: the portal's path on another fresh kubesim.
    sim, url, kubeconfig = start_kubesim(workdir, "portal")
    workers = []
    try:
        env = {**os.environ, "PORTAL_KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"}
        for n in range(args.workers):
            log = open(Path(workdir) / f"worker-{n}.log", "w")  # noqa: SIM115
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo"]
                    + [f"--hostname=bench{n}@%h", "--without-gossip", "--without-mingle"]
                    + ["--without-heartbeat", "--loglevel=WARNING"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        time.sleep(3)  # let the workers connect before the clock starts
        for team_id in team_ids:
            actions.mark_dirty(team_id)
        sim_requests(url, clear=True)
        in_sync = TeamSync.objects.filter(team_id__in=team_ids, status=TeamSync.Status.IN_SYNC)

        started = time.monotonic()
        actions.sweep()
        cold_sweep_seconds = time.monotonic() - started
        wait_until(lambda: in_sync.count() == len(team_ids), timeout=600)
        cold_seconds = time.monotonic() - started
        cold = sim_requests(url)
        cold_writes = sum(r["method"] in WRITE_METHODS for r in cold)

        say(f"cold: {cold_seconds:.2f}s; steady state")
        # 3. Steady state: nothing changed.
        sim_requests(url, clear=True)
        started = time.monotonic()
        queued = actions.sweep()
        drifted = actions.check_drift(kube.Cluster(kube.load_configuration(kubeconfig), timeout=30))
        sweep_seconds = time.monotonic() - started
        sweep_log = sim_requests(url)
        say(f"steady sweep: queued {len(queued)}, drifted {len(drifted)}; forced resync")

        sim_requests(url, clear=True)
        for team_id in team_ids:
            actions.mark_dirty(team_id)
        started = time.monotonic()
        say(f"resync queued {len(actions.sweep())}")
        wait_until(lambda: in_sync.count() == len(team_ids), timeout=600)
        resync_seconds = time.monotonic() - started
        resync = sim_requests(url)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
        sim.terminate()
        sim.wait()

    n = len(team_ids)
    figures = {
        "teams": n,
        "workers": args.workers,
        "database": connection.vendor,
        "bare_loop_seconds": round(bare_seconds, 2),
        "bare_loop_calls_per_team": round(bare_calls / n, 2),
        "cold_seconds": round(cold_seconds, 2),
        "cold_sweep_seconds": round(cold_sweep_seconds, 2),
        "cold_calls_per_team": round(len(cold) / n, 2),
        "cold_writes_per_team": round(cold_writes / n, 2),
        "cold_to_bare_ratio": round(cold_seconds / bare_seconds, 2),
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
