"""The image's web server: gunicorn with gunicorn.conf.py (workers, threads and
timeouts from the environment) serves the portal, and /metrics adds up what
every worker process counted."""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from tests.provisioning.conftest import _database_url
from tests.waiting import stop

GUNICORN = Path(sys.executable).with_name("gunicorn")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


METRICS_TOKEN = "scrape-" + "t" * 32


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, response.read().decode()


@contextlib.contextmanager
def running_gunicorn(tmp_path, database_url, **env):
    """gunicorn serving the portal on a free port: yields (url, log file)."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": database_url,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "2",
        "GUNICORN_THREADS": "2",
        "GUNICORN_TIMEOUT": "20",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "PORTAL_METRICS_TOKEN": METRICS_TOKEN,
        **env,
    }
    log = open(tmp_path / "gunicorn.log", "w+")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(GUNICORN), "portal.wsgi:application"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            get(url + "/healthz")
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail("gunicorn did not start:\n" + log.read())
            time.sleep(0.2)
    try:
        yield url, log
    finally:
        stop(process)
        log.close()


@pytest.fixture
def gunicorn(transactional_db, tmp_path):
    with running_gunicorn(tmp_path, _database_url()) as server:
        yield server


def test_gunicorn_serves_the_portal_with_metrics_of_every_worker(gunicorn, vision):
    url, log = gunicorn
    for _ in range(20):
        assert get(url + "/healthz") == (200, '{"status": "ok"}')
    status, metrics = get(url + "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200
    served = [
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("django_http_responses_total_by_status_total{")
        and 'status="200"' in line
    ]
    assert sum(served) >= 21  # the first probe too, whichever worker answered
    log.seek(0)
    text = log.read()
    assert "Using worker: gthread" in text
    assert text.count("Booting worker with pid") == 2
