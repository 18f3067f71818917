"""/metrics: request metrics and the portal's own sync figures, per team, for
Prometheus only (its bearer token, PORTAL_METRICS_TOKEN)."""

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.test import Client
from django.utils import timezone

from provisioning.models import TeamSync

TOKEN = "prometheus-" + "x" * 32


@pytest.fixture(autouse=True)
def _token(settings):
    settings.PORTAL_METRICS_TOKEN = TOKEN


def scrape():
    return Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").get("/metrics")


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
        text = scrape().content.decode()
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
    text = scrape().content.decode()
    assert "django_http_requests_latency_seconds_by_view_method_count" in text
    assert 'view="healthz"' in text


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"Token {TOKEN}", f"Bearer {TOKEN}x", "Bearer "]
)
def test_anyone_but_prometheus_is_refused(vision, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = Client(**headers).get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"vision" not in response.content


def test_without_a_token_it_is_not_there(vision, settings):
    settings.PORTAL_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    assert Client(HTTP_AUTHORIZATION="Bearer ").get("/metrics").status_code == 404
