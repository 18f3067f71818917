"""/metrics: django-prometheus' request metrics plus the portal's own, read
from the database at scrape time (a few aggregate queries, no per-team loop in
Python beyond formatting the rows). Served to Prometheus only: its bearer token
(PORTAL_METRICS_TOKEN), since the figures name teams and their failures."""

import hmac
import os

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotFound
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from portal.celery import app as celery_app
from provisioning.models import TeamSync


def _queue_length():
    """Messages waiting in Celery's default queue (Redis), or None."""
    if not celery_app.conf.broker_url.startswith(("redis://", "rediss://")):
        return None
    with celery_app.connection_for_read() as conn:
        return conn.default_channel.client.llen(celery_app.conf.task_default_queue)


class PortalCollector:
    def collect(self):
        now = timezone.now()
        lag = GaugeMetricFamily(
            "portal_team_sync_lag_seconds",
            "Seconds since a team's unsynced change was queued (0 when in sync).",
            labels=["team"],
        )
        failing = GaugeMetricFamily(
            "portal_team_sync_failing",
            "1 while the team's last sync attempt failed.",
            labels=["team"],
        )
        rows = TeamSync.objects.filter(team__archived_at=None).values_list(
            "team__slug", "status", "queued_at", "generation", "synced_generation"
        )
        oldest = 0.0
        pending = 0
        for slug, status, queued_at, generation, synced in rows:
            behind = generation > synced and queued_at is not None
            seconds = (now - queued_at).total_seconds() if behind else 0.0
            oldest = max(oldest, seconds)
            pending += generation > synced
            lag.add_metric([slug], seconds)
            failing.add_metric([slug], 1.0 if status == TeamSync.Status.FAILING else 0.0)
        yield lag
        yield failing
        yield GaugeMetricFamily(
            "portal_sync_oldest_unsynced_seconds",
            "Age of the oldest change not yet on the cluster.",
            value=oldest,
        )
        yield GaugeMetricFamily(
            "portal_sync_pending_teams", "Teams whose cluster state is behind.", value=pending
        )
        length = _queue_length()
        if length is not None:
            yield GaugeMetricFamily(
                "portal_celery_queue_length", "Tasks waiting in the Celery queue.", value=length
            )


def _refused(request):
    """The answer to a caller who is not Prometheus (settings.PORTAL_METRICS_TOKEN), or None."""
    token = settings.PORTAL_METRICS_TOKEN
    if not token:
        return None if settings.DEBUG else HttpResponseNotFound("Not found.")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    response = HttpResponse("Prometheus' bearer token, please.", status=401)
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def metrics(request):
    if refused := _refused(request):
        return refused
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        # gunicorn: every worker process writes its own files; add them up.
        process_registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(process_registry)
    else:
        process_registry = REGISTRY
    portal_registry = CollectorRegistry()
    portal_registry.register(PortalCollector())
    body = generate_latest(process_registry) + generate_latest(portal_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
