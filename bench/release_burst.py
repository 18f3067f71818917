"""The release burst at a window's opening: N planned batch Jobs unsuspended at once.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/<db> \
      .venv/bin/python bench/release_burst.py [--jobs 2000] [--teams 20] [--workers 2] \
      [--backend kubesim|kubernetes] [--nodes 1000]

Needs Redis: the database CELERY_BROKER_URL names (flushed). Uses DATABASE_URL
if set (portal_bench* re-created), else a fresh SQLite file. Loopback only;
every wait is bounded.

On kubesim (`--backend kubesim`, the default), kubesim runs `--bare` (API
server only) in its own process, so both sides pay only for the API calls;
each side has its own kubesim. On the real API server (`--backend
kubernetes`), one control plane with `--nodes` KWOK GPU nodes (half of them
H100, 8 GPUs each: room for both sides' pods) serves both sides, and the real
job controller creates each released Job's pod and the scheduler binds it: the
bare side's Jobs live in `bare-` namespaces, and the portal's side starts once
the bare side's pods are all made. Also printed there: seconds until the job
controller had made every pod of the side. Before the clock starts, the
cluster holds the teams' namespaces and every Job, suspended, as planning left
them. Then:

1. bare loop: one process applies the N released Jobs (suspend false and a
   deadline) with the client, one call each: the floor;
2. portal: `release_due()` moves the N planned jobs to released in one
   transaction and queues their outbox syncs; two Celery workers apply them.
   Timed until every job's sync is done; duplicates and misses are counted from
   kubesim's request log and the live Jobs. Also printed: database statements
   per job (PostgreSQL's transaction count; each autocommit statement is one),
   API calls per job and the messages queued, to show where the time goes.
   CPU seconds of each side's client (the bare loop's process; the workers and
   the release transaction) and of the server (kubesim; kube-apiserver + etcd).

Prints the figures docs/benchmarks.md records under "Batch release burst".
"""

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provision_500 import (  # noqa: E402
    BACKENDS,
    KubernetesBackend,
    KubesimBackend,
    load_average,
    say,
    setup_django,
    start_workers,
    stop_workers,
    wait_until,
)
from realcluster import cpu_seconds  # noqa: E402


def pod_count(backend):
    """Pods on the real cluster (only the bench makes pods there): one call."""
    listed = backend.plane.get("/api/v1/pods?limit=1")
    return len(listed["items"]) + ((listed.get("metadata") or {}).get("remainingItemCount") or 0)


def pods_made_after(backend, count, started, timeout=600):
    """Seconds from `started` until the cluster holds `count` pods, or None if it did
    not within `timeout` (a quota may refuse some: the job controller keeps trying)."""
    deadline = time.monotonic() + timeout
    while pod_count(backend) < count:
        if time.monotonic() > deadline:
            say(f"only {pod_count(backend)} of {count} pods after {timeout} s")
            return None
        time.sleep(0.5)
    return time.monotonic() - started


def bare_copy(obj):
    """`obj` in the bare side's namespace (`bare-` + the team's)."""
    meta = obj["metadata"]
    if obj["kind"] == "Namespace":
        return {**obj, "metadata": {**meta, "name": f"bare-{meta['name']}"}}
    return {**obj, "metadata": {**meta, "namespace": f"bare-{meta['namespace']}"}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--teams", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", choices=BACKENDS, default="kubesim")
    parser.add_argument(
        "--nodes", type=int, default=1000, help="KWOK GPU nodes (8 GPUs each), kubernetes only"
    )
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-release-")

    setup_django(workdir)
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from batch import launch, watch
    from batch.models import BatchJob, BatchWindow, JobSync, WindowCapacity
    from cluster import kube
    from cluster.models import Flavor
    from provisioning import manifests as team_manifests
    from teams.models import Team

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
        released_manifests.append(launch.manifest(job))
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

    real = args.backend == "kubernetes"

    def prepare(kubeconfig, copy=lambda obj: obj):
        client = kube.Cluster(kube.load_configuration(kubeconfig), timeout=30)
        for team in teams:
            client.apply(copy(team_manifests.namespace(team.slug)), field_manager="bench")
        for job in jobs:
            client.apply(copy(launch.manifest(job)), field_manager="gpu-portal")
        return client

    backend = KubernetesBackend(workdir, args.nodes) if real else KubesimBackend(workdir, "--bare")
    workers = []
    try:
        say(f"{len(jobs)} planned jobs of {len(teams)} teams; preparing (load {load_average()})")
        bare_copy_of = bare_copy if real else (lambda obj: obj)
        client = prepare(backend.open("bare"), bare_copy_of)
        if real:  # both sides' Jobs, suspended, before either clock starts
            prepare(backend.kubeconfig)
        say("bare loop")
        backend.mark()
        server_before, cpu_before = backend.server_cpu(), time.process_time()
        started = time.monotonic()
        for obj in released_manifests:
            client.apply(bare_copy_of(obj), field_manager="gpu-portal")
        bare_seconds = time.monotonic() - started
        bare_cpu = time.process_time() - cpu_before
        bare_server_cpu = backend.server_cpu() - server_before
        bare_pods_seconds = None
        if real:
            bare_pods_seconds = pods_made_after(backend, len(jobs), started)

        say(f"bare loop: {bare_seconds:.2f}s; portal")
        kubeconfig = backend.open("portal")
        client = kube.Cluster(kube.load_configuration(kubeconfig), timeout=30)
        if not real:
            prepare(kubeconfig)
        workers = start_workers(workdir, args.workers, kubeconfig, "-Q", "celery")
        time.sleep(3)  # let the workers connect before the clock starts
        backend.mark()
        done = JobSync.objects.filter(synced_generation__gte=1)
        polls = []

        def all_done():
            polls.append(1)
            return done.count() == len(released)

        worker_pids = [worker.pid for worker in workers]
        workers_before, server_before = cpu_seconds(worker_pids), backend.server_cpu()
        transactions_before = db_transactions()
        started, cpu_before = time.monotonic(), time.process_time()
        released = launch.release_due()
        release_seconds = time.monotonic() - started
        release_cpu = time.process_time() - cpu_before
        wait_until(all_done, timeout=900)
        portal_seconds = time.monotonic() - started
        portal_cpu = cpu_seconds(worker_pids) - workers_before + release_cpu
        portal_server_cpu = backend.server_cpu() - server_before
        portal_pods_seconds = None
        if real:
            portal_pods_seconds = pods_made_after(backend, 2 * len(jobs), started)
        # The workers' statements (autocommit: one transaction each), less this
        # process's polls; PostgreSQL only, its statistics flush within a second.
        time.sleep(1.5)
        transactions = db_transactions() - transactions_before - len(polls) - 1
        calls = backend.requests()
        if real:  # the audit log also holds the bench's own pod counts
            calls = [r for r in calls if not r["path"].endswith("/pods")]
        job_patches = Counter(
            r["path"] for r in calls if r["method"] == "PATCH" and "/jobs/" in r["path"]
        )
        live = client.list("Job", label_selector=watch.SELECTOR)
        portal_namespaces = {launch.job_namespace(team) for team in teams}
        running = sum(
            1
            for obj in live
            if obj["spec"].get("suspend") is False
            and obj["metadata"]["namespace"] in portal_namespaces
        )
        load = load_average()
    finally:
        stop_workers(workers)
        backend.close()
        if real:
            backend.stop()

    figures = {
        "backend": args.backend,
        "nodes": args.nodes if real else None,
        "load_average_at_end": load,
        "jobs": len(jobs),
        "teams": len(teams),
        "workers": args.workers,
        "database": connection.vendor,
        "bare_loop_seconds": round(bare_seconds, 2),
        "portal_seconds": round(portal_seconds, 2),
        "release_transaction_seconds": round(release_seconds, 2),
        "portal_to_bare_ratio": round(portal_seconds / bare_seconds, 2),
        "bare_client_cpu_seconds": round(bare_cpu, 2),
        "portal_client_cpu_seconds": round(portal_cpu, 2),
        "portal_to_bare_client_cpu_ratio": round(portal_cpu / bare_cpu, 2),
        "bare_server_cpu_seconds": round(bare_server_cpu, 2),
        "portal_server_cpu_seconds": round(portal_server_cpu, 2),
        "portal_to_bare_server_cpu_ratio": round(portal_server_cpu / bare_server_cpu, 2),
        "bare_all_pods_made_seconds": bare_pods_seconds and round(bare_pods_seconds, 2),
        "portal_all_pods_made_seconds": portal_pods_seconds and round(portal_pods_seconds, 2),
        "db_statements_per_job": round(transactions / len(jobs), 2) if transactions > 0 else None,
        "api_calls_per_job": round(len(calls) / len(jobs), 3),
        "api_calls_not_job_patches": len(calls) - sum(job_patches.values()),
        "messages": -(-len(jobs) // launch.CHUNK),
        "jobs_released": len(released),
        "duplicates": sum(count - 1 for count in job_patches.values() if count > 1),
        "missed": len(jobs) - running,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
