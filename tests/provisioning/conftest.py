"""Fixtures for provisioning: a kubesim over HTTP (with RBAC, the portal as its
ServiceAccount), real Redis, real Celery workers.

A test needing Redis skips when there is none, but fails under CI=true.
Workers are separate processes, so tests that use them commit their rows
(`transactional_db`) and point the workers at the same test database.
"""

import os
import signal
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from django.conf import settings
from django.db import connection

from cluster.models import Flavor
from provisioning.models import TeamSync
from tests.waiting import stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
# A Redis database of its own, away from the portal's (each test also prefixes
# its broker keys: see redis_url).
REDIS_DB = int(os.environ.get("PORTAL_TEST_REDIS_DB", "13"))

# The demo cluster's GPU pools, as flavors select them (kubesim/clusters/demo.yaml).
DEMO_FLAVORS = {
    "h100": ("NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", 16),
    "a100": ("NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu", 16),
    "l4": ("NVIDIA-L4", "nvidia.com/gpu", 24),
    "t4": ("Tesla-T4", "nvidia.com/gpu", 8),
    "a100-3g": ("NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-3g.40gb", 14),
    "a100-1g": ("NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-1g.10gb", 28),
}


@pytest.fixture
def demo_flavors(db):
    flavors = {}
    for slug, (product, resource, capacity) in DEMO_FLAVORS.items():
        flavors[slug] = Flavor.objects.create(
            slug=slug,
            name=slug.upper(),
            gpu_model=product,
            memory_gb=80,
            resource_name=resource,
            node_selector={"nvidia.com/gpu.product": product},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            capacity=capacity,
            price_per_gpu_hour=Decimal("2.0000"),
        )
    return flavors


# --- Redis and workers ---


def _redis_url():
    base = os.environ.get("CELERY_BROKER_URL", "")
    parts = urlsplit(base if base.startswith("redis://") else "redis://127.0.0.1:6379/0")
    return f"redis://{parts.netloc}/{REDIS_DB}"


@pytest.fixture
def redis_url(monkeypatch, settings):
    """The workers' broker, with a key prefix of this test's own: test sessions
    running side by side on one Redis never take each other's messages."""
    url = _redis_url()
    prefix = f"portal-test-{uuid.uuid4().hex[:12]}:"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis is required under CI=true: {url}: {exc}")
        pytest.skip(f"no Redis at {url}: {exc}")
    monkeypatch.setenv("CELERY_BROKER_KEY_PREFIX", prefix)  # the workers'
    settings.REDIS_BROKER_TRANSPORT_OPTIONS = {
        **settings.REDIS_BROKER_TRANSPORT_OPTIONS,
        "global_keyprefix": prefix,
    }
    yield url
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)


def _database_url():
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}{port}/{db['NAME']}"


class Workers:
    """Celery worker processes (solo pool), started and killed by the test."""

    def __init__(self, env, log_dir):
        self.env = env
        self.log_dir = log_dir
        self.processes = []

    def start(self, name="w1", **extra_env):
        log_path = self.log_dir / f"{name}-{len(self.processes)}.log"
        log = open(log_path, "w")  # noqa: SIM115 (closed with the process)
        command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo"]
        command += [f"--hostname={name}@%h", "--without-gossip", "--without-mingle"]
        command += ["--without-heartbeat", "--loglevel=INFO"]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**self.env, **extra_env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        process.log_path, process.log_file = log_path, log
        self.processes.append(process)
        wait_for(lambda: "ready." in log_path.read_text() or process.poll() is not None, timeout=30)
        if process.poll() is not None:
            raise AssertionError(f"worker {name} died:\n{log_path.read_text()}")
        return process

    def kill(self, process, sig=signal.SIGKILL):
        process.send_signal(sig)
        process.wait(timeout=10)

    def stop_all(self):
        for process in self.processes:
            stop(process)
            process.log_file.close()

    def logs(self):
        return "\n".join(p.log_path.read_text() for p in self.processes)


def _use_broker(app, url):
    """Point this process's producers at another broker (they are cached, and
    Celery reads $CELERY_BROKER_URL before its own setting)."""
    if url is None:
        os.environ.pop("CELERY_BROKER_URL", None)
    else:
        os.environ["CELERY_BROKER_URL"] = url
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = url
    # The demo's SQLite broker names its transport; any other URL names its own.
    sqlite = url is not None and url.startswith("sqlite:///")
    app.conf.broker_transport = "portal.broker:Transport" if sqlite else None
    # And its options: without Redis's (no connection retries) a publish to a
    # Redis that is down would block forever instead of failing fast.
    redis_url = url is not None and url.startswith(("redis://", "rediss://"))
    app.conf.broker_transport_options = (
        settings.SQLITE_BROKER_TRANSPORT_OPTIONS
        if sqlite
        else settings.REDIS_BROKER_TRANSPORT_OPTIONS
        if redis_url
        else {}
    )


@pytest.fixture
def workers(transactional_db, backend, redis_url, tmp_path, settings):
    """A worker factory; the test's own process queues to the same Redis."""
    from portal.celery import app

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": redis_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "PORTAL_KUBECONFIG": backend.kubeconfig,
        "PORTAL_SYNC_LEASE": "3",
        "PORTAL_KUBE_TIMEOUT": "5",
        "PYTHONUNBUFFERED": "1",
    }
    settings.PORTAL_SYNC_LEASE = 3
    previous = os.environ.get("CELERY_BROKER_URL"), app.conf.broker_transport_options
    _use_broker(app, redis_url)
    pool = Workers(env, tmp_path)
    yield pool
    pool.stop_all()
    _use_broker(app, previous[0])
    app.conf.broker_transport_options = previous[1]  # without this test's key prefix
    if os.environ.get("PROVISIONING_SHOW_WORKER_LOGS"):
        print(pool.logs())


@pytest.fixture
def eager(settings):
    """Queue nothing: run sync tasks inline (tests without a worker process)."""
    from portal.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def sync_of(team):
    return TeamSync.objects.get(team=team)
