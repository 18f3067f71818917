"""The time batch work is planned and judged by: the cluster's clock.

A Job's `activeDeadlineSeconds` runs out on the clock of the cluster's Job
controller. On a real cluster that is the real clock (`PORTAL_CLOCK=real`, the
default), and `now()` is `timezone.now()` (so time-machine in tests moves it).

kubesim's controllers run on its simulated clock, which tests and the demo move
forward (`POST /_sim/clock`). With `PORTAL_CLOCK=kubesim` the portal reads that
clock instead, so a window opens, a job is released and its deadline runs out on
one clock. A read costs one `GET /_sim/clock` per `PORTAL_CLOCK_REFRESH` seconds
in each process; between reads the clock runs on from the last read at kubesim's
speed. If kubesim cannot be read, the last read runs on (or, never read, the real
clock), with a warning.

Leases (the outbox's, the watch's) stay on the real clock: they time processes,
not plans.
"""

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from cluster import kube

log = logging.getLogger(__name__)

_lock = threading.Lock()
_last = {}  # kubeconfig -> (monotonic at the read, sim time read, speed)


def now():
    """The current instant on the cluster's clock (aware, UTC)."""
    if settings.PORTAL_CLOCK != "kubesim":
        return timezone.now()
    source = settings.PORTAL_KUBECONFIG
    with _lock:
        last = _last.get(source)
    if last is None or time.monotonic() - last[0] >= settings.PORTAL_CLOCK_REFRESH:
        last = _read(source) or last
    if last is None:
        return timezone.now()
    read_at, sim_now, speed = last
    return sim_now + timedelta(seconds=(time.monotonic() - read_at) * speed)


def _read(source):
    try:
        answer = kube.cluster().call("GET", "/_sim/clock")
        read = (
            time.monotonic(),
            datetime.fromtimestamp(float(answer["unix"]), UTC),
            float(answer["speed"]),
        )
    except (kube.ClusterError, KeyError, TypeError, ValueError) as exc:
        log.warning("could not read kubesim's clock (running on the last read): %s", exc)
        return None
    with _lock:
        _last[source] = read
    return read


def forget():
    """Read kubesim's clock afresh at the next `now()` (a test that just moved it)."""
    with _lock:
        _last.clear()
