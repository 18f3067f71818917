"""A real HTTP receiver on loopback that checks each request's signature as the
docs tell a receiver to (its own HMAC code, not the portal's), and answers
with the statuses the test lines up."""

import hashlib
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifications import actions
from tests.provisioning.conftest import (  # noqa: F401 (fixtures)
    Workers,
    _database_url,
    _use_broker,
    redis_url,
)


@pytest.fixture(autouse=True)
def _loopback_receivers(settings):
    # The receivers below listen on 127.0.0.1 over plain http, as on a developer's machine.
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False


def verify(secret, headers, body, *, now=None, tolerance=300):
    """What a receiver does (docs/webhooks.md): HMAC-SHA256 of b"v1:<ts>:" + body."""
    timestamp = headers.get("X-Portal-Timestamp", "")
    if not timestamp.isdigit() or abs((now or time.time()) - int(timestamp)) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"v1:{timestamp}:".encode() + body, hashlib.sha256)
    return hmac.compare_digest("v1=" + expected.hexdigest(), headers.get("X-Portal-Signature", ""))


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    at: float

    @property
    def json(self):
        return json.loads(self.body)


class Receiver:
    def __init__(self):
        self.received = []
        self.statuses = []  # answered in turn, then 200
        self.headers = {}  # sent with every answer
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.received.append(
                        Received(self.path, dict(self.headers), body, time.monotonic())
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                for name, value in receiver.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"no_service")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/portal?channel=gpu"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, *statuses):
        with self.lock:
            self.statuses.extend(statuses)

    def requests(self):
        with self.lock:
            return list(self.received)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def team_hook(vision, carol, receiver):
    """Vision's hook, set by its manager carol: (hook, secret)."""
    return actions.set_webhook(vision, receiver.url, by=carol)


@pytest.fixture
def admin_hook(admin_user, receiver):
    return actions.set_webhook(None, receiver.url + "&admins=1", by=admin_user)


@pytest.fixture
def webhook_workers(transactional_db, redis_url, tmp_path, settings):  # noqa: F811
    """Celery worker processes on the test's Redis and database, fast backoff."""
    from portal.celery import app

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": redis_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK": "true",
        "PORTAL_WEBHOOK_BACKOFF": "1",
        "PORTAL_WEBHOOK_MAX_ATTEMPTS": "3",
        "PORTAL_WEBHOOK_TIMEOUT": "5",
        "PYTHONUNBUFFERED": "1",
    }
    settings.PORTAL_WEBHOOK_BACKOFF = 1
    settings.PORTAL_WEBHOOK_MAX_ATTEMPTS = 3
    previous = os.environ.get("CELERY_BROKER_URL")
    _use_broker(app, redis_url)
    pool = Workers(env, tmp_path)
    yield pool
    pool.stop_all()
    _use_broker(app, previous)
