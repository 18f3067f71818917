"""The real control plane itself (controlplane/): KWOK nodes are kubesim's cluster
file, pods run as a GPU workload would, faults happen on demand, and the
exporters show what billing meters."""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from controlplane.dcgm import DcgmExporter
from controlplane.nodes import KWOK_LABEL
from kubesim import cluster as cluster_file
from kubesim.cluster import DEFAULT_CLUSTER
from tests.clusters import KubernetesBackend
from tests.waiting import wait_for

KUBECTL = str(Path(sys.executable).with_name("kubectl"))
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture
def plane(control_plane, tmp_path):
    yield control_plane
    KubernetesBackend(control_plane, tmp_path).reset()


def gpu_pod(name, annotations, restart="Never"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "restartPolicy": restart,
            "nodeSelector": H100,
            "tolerations": TOLERATE,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


def run(plane, pod):
    plane.call("POST", "/api/v1/namespaces/default/pods", pod)
    path = f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}"
    return lambda: plane.get(path)


def test_the_nodes_are_kubesims_cluster_file(plane):
    expected = {
        n["metadata"]["name"]: n
        for n in cluster_file.build_nodes(cluster_file.load(DEFAULT_CLUSTER))
    }
    live = {n["metadata"]["name"]: n for n in plane.get("/api/v1/nodes")["items"]}
    assert set(live) == set(expected)
    for name, node in expected.items():
        got = live[name]
        assert got["metadata"]["labels"].items() >= node["metadata"]["labels"].items(), name
        assert got["status"]["allocatable"] == node["status"]["allocatable"], name
        assert got["status"]["capacity"] == node["status"]["capacity"], name
        assert (got["spec"].get("taints") or []) == (node["spec"].get("taints") or []), name
        assert got["metadata"]["labels"][KWOK_LABEL] == "fake"


def test_a_pod_runs_for_its_duration_then_succeeds_or_fails_by_its_exit_code(plane):
    done = run(plane, gpu_pod("ok", {"kubesim.io/duration": "2s"}))
    failed = run(plane, gpu_pod("bad", {"kubesim.io/duration": "2s", "kubesim.io/exit-code": "3"}))
    ok = wait_for(
        lambda: (p := done()) and p["status"].get("phase") == "Succeeded" and p, timeout=60
    )
    bad = wait_for(
        lambda: (p := failed()) and p["status"].get("phase") == "Failed" and p, timeout=60
    )
    assert ok["spec"]["nodeName"].startswith("gpu-h100-")
    terminated = bad["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    started = ok["status"]["containerStatuses"][0]["state"]["terminated"]
    assert started["finishedAt"] > started["startedAt"]


def test_a_failing_always_pod_backs_off_in_crash_loop(plane):
    live = run(
        plane,
        gpu_pod("crash", {"kubesim.io/duration": "1s", "kubesim.io/exit-code": "1"}, "Always"),
    )

    def backing_off():
        statuses = (live()["status"].get("containerStatuses")) or []
        waiting = statuses and statuses[0]["state"].get("waiting", {})
        return waiting and waiting.get("reason") == "CrashLoopBackOff" and statuses[0]

    status = wait_for(backing_off, timeout=60)
    assert status["restartCount"] == 1 and status["lastState"]["terminated"]["exitCode"] == 1
    assert "back-off 10s restarting failed container=main" in status["state"]["waiting"]["message"]
    # After the 10 s back-off it runs again.
    wait_for(lambda: "running" in live()["status"]["containerStatuses"][0]["state"], timeout=60)


def test_logs_come_from_the_kubelet_api_of_kwok(plane):
    live = run(plane, gpu_pod("talk", {"kubesim.io/duration": "60s"}))
    wait_for(lambda: live()["status"].get("phase") == "Running", timeout=60)
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(plane.kubeconfig_path), "logs", "talk"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "this container is simulated" in result.stdout


def test_a_spot_reclaim_evicts_with_a_disruption_target_and_the_node_goes(plane):
    live = run(plane, gpu_pod("spot", {"kubesim.io/duration": "1h"}))
    node = wait_for(
        lambda: live()["status"].get("phase") == "Running" and live()["spec"]["nodeName"],
        timeout=60,
    )
    assert plane.reclaim(node, grace_seconds=2) == ["default/spot"]

    def disrupted():
        pod = live()
        conditions = {c["type"]: c for c in (pod or {}).get("status", {}).get("conditions") or []}
        return pod is None or conditions.get("DisruptionTarget")

    target = wait_for(disrupted, timeout=60)
    if target is not True and isinstance(target, dict):
        assert target["reason"] == "EvictionByEvictionAPI"
    wait_for(lambda: plane.get(f"/api/v1/nodes/{node}") is None, timeout=60)


def test_a_node_whose_heartbeats_stop_goes_not_ready_and_is_tainted(plane):
    plane.stop_heartbeats("cpu-0")

    def unreachable():
        node = plane.get("/api/v1/nodes/cpu-0")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        return ready["status"] == "Unknown" and "node.kubernetes.io/unreachable" in taints

    wait_for(unreachable, timeout=120)
    plane.stop_heartbeats("cpu-0", stopped=False)


def test_the_exporters_show_a_running_gpu_pod(plane):
    live = run(plane, gpu_pod("busy", {"kubesim.io/duration": "1h", "kubesim.io/gpu-util": "80"}))
    node = wait_for(
        lambda: live()["status"].get("phase") == "Running" and live()["spec"]["nodeName"],
        timeout=60,
    )

    def page(url):
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    dcgm = wait_for(
        lambda: (
            'pod="busy"'
            in (text := page(f"http://127.0.0.1:{plane.dcgm_port}/metrics/dcgm/{node}"))
            and text
        ),
        timeout=30,
    )
    line = next(
        row
        for row in dcgm.splitlines()
        if row.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and 'pod="busy"' in row
    )
    assert 0.6 < float(line.rsplit(" ", 1)[1]) <= 1.0
    targets = json.loads(page(f"http://127.0.0.1:{plane.dcgm_port}/targets"))
    assert {t["labels"]["node"] for t in targets} >= {node}
    ksm = wait_for(
        lambda: (
            'pod="busy"' in (text := page(f"http://127.0.0.1:{plane.ksm_port}/metrics")) and text
        ),
        timeout=30,
    )
    requests = [
        row for row in ksm.splitlines()
        if row.startswith("kube_pod_container_resource_requests{") and 'pod="busy"' in row
    ]  # fmt: skip
    assert any(
        'resource="nvidia_com_gpu"' in row and 'unit="integer"' in row and row.endswith(" 1")
        for row in requests
    )


def test_the_dcgm_pages_work_over_either_api_server(backend, cluster):
    """One exporter module for both backends: kubesim's pods say which GPU they hold,
    the real cluster's do not (the exporter chooses, as the device plugin did)."""
    cluster.call(
        "POST",
        "/api/v1/namespaces/default/pods",
        body=gpu_pod("held", {"kubesim.io/duration": "1h"}),
    )
    phase = lambda: (cluster.get("Pod", "held", "default") or {}).get("status", {}).get("phase")  # noqa: E731
    wait_for(lambda: phase() == "Running", timeout=60)
    exporter = DcgmExporter(backend.admin_kubeconfig).start()
    try:
        node = cluster.get("Pod", "held", "default")["spec"]["nodeName"]
        page = exporter.page(node)
        held = [
            row
            for row in page.splitlines()
            if 'pod="held"' in row and row.startswith("DCGM_FI_DEV_FB_USED{")
        ]
        assert (
            len(held) == 1 and 'namespace="default"' in held[0] and f'Hostname="{node}"' in held[0]
        )
        assert exporter.page("cpu-0") is None  # no GPU, no exporter pod
    finally:
        exporter.stop()
