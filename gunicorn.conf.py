"""gunicorn's settings for the portal (read from the working directory), each
from the environment so the container image serves any size of deployment.

Threads share a worker's memory, and each holds at most one PostgreSQL
connection: the web tier opens at most GUNICORN_WORKERS x GUNICORN_THREADS.
"""

import os
import shutil


def _int(name, default):
    raw = os.environ.get(name) or str(default)
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a whole number") from None


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = _int("GUNICORN_WORKERS", 2)
threads = _int("GUNICORN_THREADS", 4)
worker_class = "gthread"
# A request taking longer than this is killed (and answered 502 by the proxy).
timeout = _int("GUNICORN_TIMEOUT", 30)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 20)
keepalive = _int("GUNICORN_KEEPALIVE", 5)
# Recycle workers now and then, so a slow leak never takes a pod down.
max_requests = _int("GUNICORN_MAX_REQUESTS", 5000)
max_requests_jitter = max_requests // 10
# portal.requests logs every request already (JSON with PORTAL_LOG_FORMAT=json).
accesslog = None
errorlog = "-"
# Headers as the Ingress sets them; only the proxy in front may set them.
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "*")

# Prometheus: each worker writes its metrics to files that /metrics adds up.
_metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")


def on_starting(server):
    if _metrics_dir:
        shutil.rmtree(_metrics_dir, ignore_errors=True)
        os.makedirs(_metrics_dir, exist_ok=True)


def child_exit(server, worker):
    if _metrics_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
