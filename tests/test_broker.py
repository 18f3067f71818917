"""The demo's broker (kombu's SQLAlchemy transport on an SQLite file) under
concurrent producers and a real worker: every message delivered, once.

The filesystem transport it replaces let a worker read a message file that
was created but not yet written (JSONDecodeError) and died.
"""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from portal import broker as demo_broker
from tests.waiting import stop, wait_for

ROOT = Path(__file__).resolve().parents[1]
PER_PRODUCER = 1500

PRODUCE = """
import sys
from celery import Celery
broker, path, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
app = Celery(broker=broker)
app.conf.broker_transport = "portal.broker:Transport"
app.conf.broker_transport_options = {"connect_args": {"timeout": 30}}
with app.connection_for_write() as connection, app.producer_or_acquire() as producer:
    for n in range(count):
        app.send_task("tests.record_delivery", (path, f"{name}-{n}"), producer=producer)
print("sent", count)
"""


def test_two_producers_and_a_worker_lose_nothing(tmp_path):
    broker = f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    demo_broker.prepare(broker)
    deliveries = tmp_path / "deliveries"
    deliveries.touch()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "CELERY_BROKER_URL": broker,
        "PYTHONUNBUFFERED": "1",
    }
    worker_log = tmp_path / "worker.log"
    with open(worker_log, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-I", "tests.broker_tasks",
             "--concurrency=2", "--without-gossip", "--without-mingle", "--loglevel=INFO"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: "ready." in worker_log.read_text(), timeout=60)
        producers = [
            subprocess.Popen(
                [sys.executable, "-c", PRODUCE, broker, str(deliveries), name, str(PER_PRODUCER)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )  # fmt: skip
            for name in ("a", "b")
        ]
        for producer in producers:
            output, _ = producer.communicate(timeout=300)
            assert producer.returncode == 0, output
        total = 2 * PER_PRODUCER

        def all_delivered():
            lines = deliveries.read_text().splitlines()
            return lines if len(lines) >= total else None

        lines = wait_for(all_delivered, timeout=300)
        assert worker.poll() is None, worker_log.read_text()[-3000:]
    finally:
        stop(worker)
    expected = Counter(f"{name}-{n}" for name in ("a", "b") for n in range(PER_PRODUCER))
    assert Counter(lines) == expected  # none lost, none twice
    assert "Traceback" not in worker_log.read_text()
