"""A real Prometheus scrapes kubesim's DCGM page and answers per-namespace PromQL.

Skipped when /usr/bin/prometheus is missing, except under CI=true where it fails."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from kubesim.control import SMALL_CLUSTER
from kubesim.testing import running_kubesim
from tests.kubesim.simhelpers import Clients, pod, wait_for

pytestmark = pytest.mark.prometheus

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def prometheus_binary():
    if not os.path.exists(PROMETHEUS):
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is not installed (apt-get install prometheus)")
        pytest.skip("prometheus is not installed")
    return PROMETHEUS


@pytest.fixture
def prometheus(prometheus_binary):
    """Start Prometheus scraping the running kubesim; yields a query function."""
    processes = []
    directory = tempfile.mkdtemp(prefix="kubesim-prom-")

    def start(target_port: int):
        config = os.path.join(directory, "prometheus.yml")
        with open(config, "w") as handle:
            handle.write(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                "  - job_name: dcgm\n"
                "    honor_labels: true\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
            )
        port = free_port()
        process = subprocess.Popen(
            [
                prometheus_binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={os.path.join(directory, 'data')}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        base = f"http://127.0.0.1:{port}"

        def ready():
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as response:
                    return response.status == 200
            except OSError:
                assert process.poll() is None, "prometheus exited"
                return False

        wait_for(ready, timeout=20, interval=0.1)

        def query(promql: str) -> list:
            url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
            with urllib.request.urlopen(url, timeout=5) as response:
                body = json.loads(response.read())
            assert body["status"] == "success"
            return body["data"]["result"]

        return query

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    shutil.rmtree(directory, ignore_errors=True)


def running(k, ns, name) -> bool:
    return k.core.read_namespaced_pod(name, ns).status.phase == "Running"


def test_prometheus_sees_per_namespace_gpu_utilisation(prometheus):
    started = time.monotonic()
    with running_kubesim(SMALL_CLUSTER) as sim:
        k = Clients(sim)
        idle_ns, busy_ns = k.namespace("idle"), k.namespace("busy")
        k.core.create_namespaced_pod(
            idle_ns, pod("notebook", 1, {"kubesim.io/gpu-profile": "idle"})
        )
        k.core.create_namespaced_pod(busy_ns, pod("train", 1, {"kubesim.io/gpu-profile": "busy"}))
        for ns, name in ((idle_ns, "notebook"), (busy_ns, "train")):
            wait_for(lambda ns=ns, name=name: running(k, ns, name))

        query = prometheus(sim.port)
        promql = 'avg by (namespace) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!=""})'

        def both_namespaces():
            result = {r["metric"]["namespace"]: float(r["value"][1]) for r in query(promql)}
            return result if {idle_ns, busy_ns} <= result.keys() else None

        by_namespace = wait_for(both_namespaces, timeout=15, interval=0.25)
        assert by_namespace[idle_ns] == 0
        assert 0.85 <= by_namespace[busy_ns] <= 0.95
        # The scraped series keep the exporter's labels.
        (series,) = query(f'DCGM_FI_DEV_GPU_UTIL{{pod="train",namespace="{busy_ns}"}}')
        assert series["metric"]["modelName"] and series["metric"]["UUID"].startswith("GPU-")
    assert time.monotonic() - started < 30
