"""A real Prometheus for billing tests: loaded from OpenMetrics with promtool,
or scraping targets. Skipped when the binaries are missing, except under
CI=true where that fails (tests/conftest.py)."""

import os
import shutil
import socket
import subprocess
import urllib.request
from contextlib import contextmanager

import pytest

from tests.kubesim.simhelpers import wait_for
from tests.waiting import stop

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def require_prometheus():
    for binary in (PROMETHEUS, PROMTOOL):
        if not os.path.exists(binary):
            pytest.skip(f"{binary} is not installed (apt-get install prometheus)")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_openmetrics(text, directory):
    """Write `text` to a file and turn it into TSDB blocks under directory/data."""
    source = os.path.join(directory, "history.om")
    with open(source, "w") as handle:
        handle.write(text)
    data = os.path.join(directory, "data")
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", source, data],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return data


@contextmanager
def running_prometheus(directory, *, scrape="", scrape_interval="1s"):
    """Start Prometheus on directory/data, with `scrape` (YAML of scrape_configs
    items) if given; yields its base URL and stops it after."""
    config = os.path.join(directory, "prometheus.yml")
    with open(config, "w") as handle:
        handle.write(
            f"global: {{scrape_interval: {scrape_interval}, evaluation_interval: 15s}}\n"
            "scrape_configs:\n" + scrape
        )
    port = free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(directory, 'data')}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as response:
                return response.status == 200
        except OSError:
            assert process.poll() is None, "prometheus exited"
            return False

    try:
        wait_for(ready, timeout=30, interval=0.1)
        yield base
    finally:
        stop(process)
