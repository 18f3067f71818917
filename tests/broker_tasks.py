"""A task for tests/test_broker.py: record each delivery in a file, nothing else."""

import os

from celery import shared_task


@shared_task(name="tests.record_delivery", acks_late=True)
def record_delivery(path, label):
    # One write with O_APPEND: lines from the worker's processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{label}\n".encode())
    finally:
        os.close(fd)
