"""Probes for Kubernetes: /healthz says the process answers; /readyz that
what a request needs answers too, each within a short timeout, so a pod that
cannot serve is taken out of the Service instead of answering 500s."""

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from cluster import kube
from portal.celery import app as celery_app


def healthz(request):
    return JsonResponse({"status": "ok"})


def check_database():
    # A fresh thread has its own connection; close it so probes do not pile them up.
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        connection.close()


def check_broker():
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=settings.PORTAL_READY_TIMEOUT)


def check_cluster():
    kube.cluster().call("GET", "/version")


CHECKS = {"database": check_database, "broker": check_broker, "cluster": check_cluster}
# Long-lived threads, so each keeps its cluster client (kube.cluster() is per
# thread); a check that hangs holds its thread and the next probe says so.
_pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="readyz")


@never_cache
def readyz(request):
    """200 when every check passes within PORTAL_READY_TIMEOUT seconds, else
    503 naming what failed (the checks run side by side)."""
    futures = {name: _pool.submit(check) for name, check in CHECKS.items()}
    results = {}
    for name, future in futures.items():
        try:
            future.result(timeout=settings.PORTAL_READY_TIMEOUT)
            results[name] = "ok"
        except FutureTimeout:
            results[name] = f"no answer within {settings.PORTAL_READY_TIMEOUT}s"
        except Exception as exc:  # any failure means not ready
            results[name] = f"{type(exc).__name__}: {exc}"[:300]
    ready = all(result == "ok" for result in results.values())
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": results},
        status=200 if ready else 503,
    )
