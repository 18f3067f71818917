"""Polling for tests that wait on another process: no sleeps standing in for
synchronisation, and each poll reads once (the predicate returns what it read)."""

import subprocess
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


def stop(process, *, grace=30.0):
    """Ask a child process to stop, and kill it if it has not within `grace`
    seconds (a loaded machine can hold a Celery beat past its SIGTERM)."""
    if process.poll() is None:
        process.terminate()
    try:
        return process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
