"""Simulated time: real elapsed time scaled by `speed`, plus explicit jumps."""

import threading
import time
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self, speed: float = 1.0, start: datetime | None = None):
        self._lock = threading.Lock()
        self._base = start or datetime.now(UTC).replace(microsecond=0)
        self._real_anchor = time.monotonic()
        self._speed = float(speed)

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> datetime:
        with self._lock:
            elapsed = (time.monotonic() - self._real_anchor) * self._speed
            return self._base + timedelta(seconds=elapsed)

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._base += timedelta(seconds=seconds)
        return self.now()

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        # Re-anchor so the change applies from now on, without a jump in time.
        with self._lock:
            real_now = time.monotonic()
            self._base += timedelta(seconds=(real_now - self._real_anchor) * self._speed)
            self._real_anchor = real_now
            self._speed = float(speed)

    def timestamp(self) -> str:
        """RFC 3339 at second precision, as Kubernetes writes metav1.Time."""
        return format_time(self.now())


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    # fromisoformat is ~10x faster than strptime; it takes this exact shape too.
    if len(text) == 20 and text[10] == "T" and text[19] == "Z":
        return datetime.fromisoformat(text[:19]).replace(tzinfo=UTC)
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
