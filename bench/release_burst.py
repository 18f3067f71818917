"""The release burst at a window's opening: N planned batch Jobs unsuspended at once.

    .venv/bin/python bench/release_burst.py [--jobs 2000] [--teams 20] [--workers 2]

Needs Redis (CELERY_BROKER_URL's host, database 14). Uses DATABASE_URL if set,
else a fresh SQLite file. kubesim runs `--bare` (API server only) in its own
process, so both sides pay only for the API calls. Before the clock starts,
each side's kubesim holds the teams' namespaces and every Job, suspended, as
planning left them. Then:

1. bare loop: one process applies the N released Jobs (suspend false and a
   deadline) with the client, one call each: the floor;
2. portal: `release_due()` moves the N planned jobs to released in one
   transaction and queues their outbox syncs; two Celery workers apply them.
   Timed until every job's sync is done; duplicates and misses are counted from
   kubesim's request log and the live Jobs. Also printed: database statements
   per job (PostgreSQL's transaction count; each autocommit statement is one),
   API calls per job and the messages queued, to show where the time goes.

Prints the figures docs/benchmarks.md records under "Batch release burst".
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provision_500 import say, setup_django, sim_requests, start_kubesim, wait_until  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--teams", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-release-")

    setup_django(workdir)
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from batch import cluster as batch_cluster
    from batch.models import BatchJob, BatchWindow, JobSync, WindowCapacity
    from cluster import kube
    from gpu_requests.models import Flavor, Team
    from provisioning import manifests as team_manifests

    flavor = Flavor.objects.create(
        slug="h100",
        name="H100",
        gpu_model="NVIDIA-H100-80GB-HBM3",
        memory_gb=80,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        capacity=100_000,
        price_per_gpu_hour=Decimal("4.0000"),
    )
    user = get_user_model().objects.create(username="bench", is_superuser=True)
    now = timezone.now()
    opens = now.replace(second=0, microsecond=0)
    window = BatchWindow.objects.create(
        name="burst",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=opens.time(),
        end_time=(opens + timedelta(hours=4)).time(),
    )
    WindowCapacity.objects.create(window=window, flavor=flavor, gpus=args.jobs)
    teams = Team.objects.bulk_create(
        Team(slug=f"team-{n:03d}", name=f"Team {n:03d}") for n in range(args.teams)
    )
    jobs = BatchJob.objects.bulk_create(
        BatchJob(
            team=teams[n % len(teams)],
            name=f"job-{n}",
            flavor=flavor,
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            command=["python", "train.py"],
            gpus=1,
            expected_runtime_minutes=60,
            max_runtime_minutes=120,
            status=BatchJob.Status.PLANNED,
            window=window,
            opens_at=opens,
            closes_at=opens + timedelta(hours=4),
            planned_start=opens,
            planned_end=opens + timedelta(hours=2),
            estimated_cost=Decimal("2.00"),
            on_demand_cost=Decimal("4.00"),
            created_by=user,
        )
        for n in range(args.jobs)
    )
    jobs = list(BatchJob.objects.select_related("team", "flavor", "window").order_by("pk"))
    released_manifests = []
    for job in jobs:
        job.status, job.deadline_seconds = BatchJob.Status.RELEASED, 7200
        released_manifests.append(batch_cluster.manifest(job))
        job.status, job.deadline_seconds = BatchJob.Status.PLANNED, None

    def db_transactions():
        if connection.vendor != "postgresql":
            return 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            )
            return cursor.fetchone()[0]

    def prepare(kubeconfig):
        client = kube.Cluster(kube.load_configuration(kubeconfig), timeout=30)
        for team in teams:
            client.apply(team_manifests.namespace(team.slug), field_manager="bench")
        for job in jobs:
            client.apply(batch_cluster.manifest(job), field_manager="gpu-portal")
        return client

    say(f"{len(jobs)} planned jobs of {len(teams)} teams; bare loop")
    sim, url, kubeconfig = start_kubesim(workdir, "bare", "--bare")
    try:
        client = prepare(kubeconfig)
        sim_requests(url, clear=True)
        started = time.monotonic()
        for obj in released_manifests:
            client.apply(obj, field_manager="gpu-portal")
        bare_seconds = time.monotonic() - started
    finally:
        sim.terminate()
        sim.wait()

    say(f"bare loop: {bare_seconds:.2f}s; portal")
    sim, url, kubeconfig = start_kubesim(workdir, "portal", "--bare")
    workers = []
    try:
        client = prepare(kubeconfig)
        env = {**os.environ, "PORTAL_KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"}
        for n in range(args.workers):
            log = open(Path(workdir) / f"worker-{n}.log", "w")  # noqa: SIM115
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo"]
                    + [f"--hostname=bench{n}@%h", "--without-gossip", "--without-mingle"]
                    + ["--without-heartbeat", "--loglevel=WARNING", "-Q", "celery"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        time.sleep(3)  # let the workers connect before the clock starts
        sim_requests(url, clear=True)
        done = JobSync.objects.filter(synced_generation__gte=1)
        polls = []

        def all_done():
            polls.append(1)
            return done.count() == len(released)

        transactions_before = db_transactions()
        started = time.monotonic()
        released = batch_cluster.release_due()
        release_seconds = time.monotonic() - started
        wait_until(all_done, timeout=900)
        portal_seconds = time.monotonic() - started
        # The workers' statements (autocommit: one transaction each), less this
        # process's polls; PostgreSQL only, its statistics flush within a second.
        time.sleep(1.5)
        transactions = db_transactions() - transactions_before - len(polls) - 1
        calls = sim_requests(url)
        job_patches = Counter(
            r["path"] for r in calls if r["method"] == "PATCH" and "/jobs/" in r["path"]
        )
        live = client.list("Job", label_selector=batch_cluster.SELECTOR)
        running = sum(1 for obj in live if obj["spec"].get("suspend") is False)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
        sim.terminate()
        sim.wait()

    figures = {
        "jobs": len(jobs),
        "teams": len(teams),
        "workers": args.workers,
        "database": connection.vendor,
        "bare_loop_seconds": round(bare_seconds, 2),
        "portal_seconds": round(portal_seconds, 2),
        "release_transaction_seconds": round(release_seconds, 2),
        "portal_to_bare_ratio": round(portal_seconds / bare_seconds, 2),
        "db_statements_per_job": round(transactions / len(jobs), 2) if transactions > 0 else None,
        "api_calls_per_job": round(len(calls) / len(jobs), 3),
        "api_calls_not_job_patches": len(calls) - sum(job_patches.values()),
        "messages": -(-len(jobs) // batch_cluster.CHUNK),
        "jobs_released": len(released),
        "duplicates": sum(count - 1 for count in job_patches.values() if count > 1),
        "missed": len(jobs) - running,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
