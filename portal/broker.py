"""The demo's Celery broker: kombu's SQLAlchemy transport on an SQLite file.

Settings choose it for a `sqlite:///` CELERY_BROKER_URL (the default); Redis
URLs use kombu's Redis transport as before.
"""

import contextlib
import sqlite3
from pathlib import Path

from kombu.transport import sqlalchemy

SCHEME = "sqlite:///"


class Transport(sqlalchemy.Transport):
    """kombu's SQLAlchemy transport, polling every 0.05 s instead of every second.

    A worker holding as many messages as it may prefetch polls again only
    after the interval: at 1 s a backlog drained at a few tasks a second.
    Each poll of an empty queue is one short SQLite transaction.
    """

    polling_interval = 0.05


def prepare(url):
    """Put the broker's SQLite file in WAL mode (kept in the file), so producers
    write while the worker reads, and drop messages already delivered."""
    if not url.startswith(SCHEME):
        return
    path = Path(url.removeprefix(SCHEME))
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        # kombu marks a delivered message invisible and keeps it. One held by
        # a worker that died goes too: the beat sweeps queue its work again.
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'kombu_message'").fetchone():
            with db:
                db.execute("DELETE FROM kombu_message WHERE NOT visible")
