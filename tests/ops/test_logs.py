"""One log line per request (and per task), JSON when asked; an expected 403
or 404 leaves one line and no traceback."""

import json
import os
import subprocess
import sys

from django.conf import settings
from django.test import Client

from tests.api.conftest import client_for


def test_each_request_logs_one_line_without_a_traceback(alice, bob, caplog):
    client = client_for(alice)
    with caplog.at_level("INFO"):
        client.get("/api/v1/teams/nlp/")  # another team's: 404
        Client().get("/no-such-page/")
        client.post("/api/v1/quota-requests/1/approve/", {}, format="json")  # 404 as well
        client.get("/review/")  # not a reviewer: 403
    lines = [r for r in caplog.records if r.name == "portal.requests"]
    assert [(r.method, r.path, r.status) for r in lines] == [
        ("GET", "/api/v1/teams/nlp/", 404),
        ("GET", "/no-such-page/", 404),
        ("POST", "/api/v1/quota-requests/1/approve/", 404),
        ("GET", "/review/", 403),
    ]
    assert lines[0].user_id == alice.pk
    assert not [r for r in caplog.records if r.exc_info]
    assert not [r for r in caplog.records if r.name.startswith("django")]


SCRIPT = """
import django
django.setup()
from django.test import Client
Client().get("/healthz")
from portal import logs
logs.task_started(task_id="t1")
class Task: name = "provisioning.sync_team"
logs.task_finished(task_id="t1", task=Task, state="SUCCESS")
"""


def test_json_lines_when_asked():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, "PORTAL_LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )
    assert result.returncode == 0, result.stderr
    # (Warnings, e.g. whitenoise's about uncollected static files, are not log lines.)
    lines = [line for line in result.stderr.splitlines() if line.startswith("{")]
    request, task = (json.loads(line) for line in lines)
    assert request["logger"] == "portal.requests"
    assert request["path"] == "/healthz"
    assert request["status"] == 200
    assert request["level"] == "INFO"
    assert isinstance(request["duration_ms"], float)
    assert task["logger"] == "portal.tasks"
    assert task["task"] == "provisioning.sync_team"
    assert task["state"] == "SUCCESS"
