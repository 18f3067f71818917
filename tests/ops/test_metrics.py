"""/metrics: request metrics and the portal's own sync figures, per team."""

from datetime import timedelta

import time_machine
from django.conf import settings
from django.test import Client
from django.utils import timezone

from provisioning.models import TeamSync


def sample(text, name, **labels):
    wanted = name + (
        "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    )
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {wanted}")


def test_it_reports_sync_lag_failures_and_the_oldest_unsynced_team(vision, nlp):
    now = timezone.now()
    TeamSync.objects.create(
        team=vision, status="pending", generation=3, synced_generation=2, queued_at=now
    )
    TeamSync.objects.create(
        team=nlp, status="failing", generation=5, synced_generation=5, queued_at=now
    )
    with time_machine.travel(now + timedelta(seconds=90), tick=False):
        text = Client().get("/metrics").content.decode()
    assert sample(text, "portal_team_sync_lag_seconds", team="vision") == 90.0
    assert sample(text, "portal_team_sync_lag_seconds", team="nlp") == 0.0
    assert sample(text, "portal_team_sync_failing", team="nlp") == 1.0
    assert sample(text, "portal_team_sync_failing", team="vision") == 0.0
    assert sample(text, "portal_sync_oldest_unsynced_seconds") == 90.0
    assert sample(text, "portal_sync_pending_teams") == 1.0
    if settings.CELERY_BROKER_URL.startswith("redis://"):  # as in CI and production
        assert sample(text, "portal_celery_queue_length") >= 0


def test_it_reports_request_latency(db):
    Client().get("/healthz")
    text = Client().get("/metrics").content.decode()
    assert "django_http_requests_latency_seconds_by_view_method_count" in text
    assert 'view="healthz"' in text
