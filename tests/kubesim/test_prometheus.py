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

from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import Clients, pod, wait_for
from tests.waiting import stop

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

    def start(target_port: int | None = None, scrape_configs: str | None = None):
        """Scrape kubesim's /metrics at `target_port`, or use `scrape_configs` (YAML)."""
        config = os.path.join(directory, "prometheus.yml")
        if scrape_configs is None:
            scrape_configs = (
                "  - job_name: dcgm\n"
                "    honor_labels: true\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
            )
        with open(config, "w") as handle:
            handle.write(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n" + scrape_configs
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

    start.directory = directory
    yield start
    for process in processes:
        stop(process)
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


def test_prometheus_scrapes_per_node_dcgm_through_file_sd_and_kube_state_metrics(prometheus):
    with running_kubesim(SMALL_CLUSTER) as sim:
        k = Clients(sim)
        targets = os.path.join(prometheus.directory, "dcgm-targets.json")
        sim.control_plane.exporters.keep_file_sd(targets, f"127.0.0.1:{sim.port}")
        vision, nlp = k.namespace("vision"), k.namespace("nlp")
        long_run = {"kubesim.io/duration": "1h"}
        k.core.create_namespaced_pod(
            vision, pod("train", 2, {**long_run, "kubesim.io/gpu-util": "80"})
        )
        k.core.create_namespaced_pod(
            nlp,
            pod(
                "notebook",
                1,
                {**long_run, "kubesim.io/gpu-profile": "idle"},
                resource="nvidia.com/mig-1g.10gb",
            ),
        )
        for ns, name in ((vision, "train"), (nlp, "notebook")):
            wait_for(lambda ns=ns, name=name: running(k, ns, name))

        # The scrape config an operator writes: DCGM through file_sd without
        # honor_labels (pod labels arrive as exported_*), kube-state-metrics with it.
        query = prometheus(
            scrape_configs=(
                "  - job_name: dcgm\n"
                f"    file_sd_configs: [{{files: ['{targets}'], refresh_interval: 1s}}]\n"
                "  - job_name: kube-state-metrics\n"
                "    honor_labels: true\n"
                "    metrics_path: /metrics/kube-state-metrics\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{sim.port}']}}]\n"
            )
        )

        def answer(promql, label):
            return {r["metric"].get(label): float(r["value"][1]) for r in query(promql)}

        up = wait_for(lambda: (r := answer('up{job="dcgm"}', "node")) and len(r) == 3 and r, 15)
        assert up == {"gpu-h100-0": 1, "gpu-l4-0": 1, "gpu-mig-0": 1}

        allocated = (
            'sum by (namespace) (kube_pod_container_resource_requests{unit="integer",'
            'resource=~"nvidia_com_gpu|nvidia_com_mig_.*"}'
            ' * on (namespace, pod) group_left () (kube_pod_status_phase{phase="Running"} == 1))'
        )
        held = wait_for(lambda: (r := answer(allocated, "namespace")) and len(r) == 2 and r, 15)
        assert held == {vision: 2, nlp: 1}

        busy = 'avg by (exported_namespace) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace!=""})'
        ratio = wait_for(
            lambda: (r := answer(busy, "exported_namespace")) and len(r) == 2 and r, 15
        )
        assert 0.75 <= ratio[vision] <= 0.85 and ratio[nlp] == 0
        (series,) = query('DCGM_FI_DEV_FB_USED{exported_pod="notebook"}')
        assert series["metric"]["Hostname"] == series["metric"]["node"] == "gpu-mig-0"
        assert series["metric"]["job"] == "dcgm"
