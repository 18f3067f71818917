"""Polling for tests that wait on another process: no sleeps standing in for
synchronisation, and each poll reads once (the predicate returns what it read)."""

import time


def wait_for(condition, *, timeout=20.0, interval=0.1, every=None):
    """Poll until `condition()` is truthy and return it; call `every()` between polls."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout}s: {condition}")
        if every is not None:
            every()
        time.sleep(interval)
