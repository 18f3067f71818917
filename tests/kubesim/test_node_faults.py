"""Nodes that fail: Ready False/Unknown with taints and taint eviction, cordon, deleted
nodes and pod GC, GPU XIDs, scheduling gates and pod logs, over HTTP with the official
client and kubectl, judged against what a real cluster does."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from kubernetes.client.rest import ApiException

from kubesim.clock import parse_time
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import (
    Clients,
    condition,
    job,
    pod,
    pod_gone,
    running_pod,
    wait_for,
)

KUBECTL = Path(sys.executable).parent / "kubectl"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
CPU_NODE = {"kubernetes.io/hostname": "cpu-0"}


@pytest.fixture
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def kubectl(k, *args):
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", k.sim.kubeconfig_path, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result


def post(k, path, body):
    response = requests.post(f"{k.sim.url}/_sim/nodes/{path}", json=body, timeout=10)
    return response.status_code, response.json()


def taints(k, node):
    return [(t.key, t.effect) for t in k.core.read_node(node).spec.taints or []]


def test_an_unreachable_node_is_tainted_skipped_and_its_pods_evicted_after_300s(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("web", annotations={"kubesim.io/duration": "1h"}, node_selector=CPU_NODE)
    )
    running_pod(k, ns, "web")
    status, answer = post(k, "cpu-0/condition", {"status": "Unknown"})
    assert status == 200
    ready = {c["type"]: c for c in answer["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    unreachable = [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    assert wait_for(lambda: taints(k, "cpu-0") == unreachable)
    added = k.core.read_node("cpu-0").spec.taints[1].time_added
    assert added is not None

    k.core.create_namespaced_pod(ns, pod("late", node_selector=CPU_NODE))
    message = wait_for(
        lambda: (
            (c := condition(k.core.read_namespaced_pod("late", ns), "PodScheduled")) and c.message
        )
    )
    assert "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }" in message

    k.advance(290)  # the default toleration lasts 300 s
    assert k.core.read_namespaced_pod("web", ns).metadata.deletion_timestamp is None
    k.advance(11)
    evicted = wait_for(
        lambda: (p := k.core.read_namespaced_pod("web", ns)).metadata.deletion_timestamp and p
    )
    target = condition(evicted, "DisruptionTarget")
    assert (target.reason, target.message) == (
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )
    # Nobody answers on the node: the pod stays Terminating, as on a real cluster.
    k.advance(60)
    assert k.core.read_namespaced_pod("web", ns).status.phase == "Running"
    post(k, "cpu-0/condition", {"status": "True"})
    assert wait_for(lambda: pod_gone(k, ns, "web"))
    assert wait_for(lambda: taints(k, "cpu-0") == [])


def test_a_not_ready_node_evicts_pods_by_their_own_toleration_seconds(k):
    ns = k.namespace()
    tolerate_60 = [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        }
    ]
    manifest = pod("quick", annotations={"kubesim.io/duration": "1h"}, node_selector=CPU_NODE)
    manifest["spec"]["tolerations"] = tolerate_60
    k.core.create_namespaced_pod(ns, manifest)
    running_pod(k, ns, "quick")
    assert post(k, "cpu-0/condition", {"status": "False"})[0] == 200
    assert wait_for(lambda: ("node.kubernetes.io/not-ready", "NoExecute") in taints(k, "cpu-0"))
    k.advance(61)
    evicted = wait_for(
        lambda: (p := k.core.read_namespaced_pod("quick", ns)).metadata.deletion_timestamp and p
    )
    assert condition(evicted, "DisruptionTarget").reason == "DeletionByTaintManager"


def test_condition_endpoint_rejects_bad_input(k):
    assert post(k, "cpu-0/condition", {"status": "Maybe"})[0] == 400
    assert post(k, "cpu-0/condition", {"type": "MemoryPressure", "status": "True"})[0] == 400
    assert post(k, "ghost/condition", {"status": "False"})[0] == 404


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl wheel not installed")
def test_kubectl_cordon_adds_the_unschedulable_taint(k):
    assert kubectl(k, "cordon", "cpu-1").returncode == 0
    assert wait_for(
        lambda: taints(k, "cpu-1") == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    )
    out = kubectl(k, "get", "node", "cpu-1").stdout
    assert "Ready,SchedulingDisabled" in out
    assert kubectl(k, "uncordon", "cpu-1").returncode == 0
    assert wait_for(lambda: taints(k, "cpu-1") == [])


def test_pods_of_a_deleted_node_are_garbage_collected(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("web", annotations={"kubesim.io/duration": "1h"}, node_selector=CPU_NODE)
    )
    k.batch.create_namespaced_job(
        ns, job("train", 0, {"kubesim.io/duration": "1h"}, node_selector=CPU_NODE)
    )
    running_pod(k, ns, "web")
    (trained,) = wait_for(
        lambda: [
            p
            for p in k.core.list_namespaced_pod(ns, label_selector="job-name=train").items
            if p.status.phase == "Running"
        ]
    )
    events = []
    watch_stream = k.core.list_namespaced_pod(ns, watch=True, _preload_content=False)
    k.core.delete_node("cpu-0")
    for line in watch_stream:
        event = json.loads(line)
        events.append(event)
        if event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "web":
            break
    watch_stream.close()
    last = next(
        e["object"]
        for e in reversed(events)
        if e["object"]["metadata"]["name"] == "web" and e["type"] == "MODIFIED"
    )
    assert last["status"]["phase"] == "Failed"
    target = next(c for c in last["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["reason"], target["message"]) == (
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )
    # The Job's pod is counted as failed before it goes (its finalizer holds it).
    assert wait_for(lambda: pod_gone(k, ns, trained.metadata.name))
    assert k.batch.read_namespaced_job("train", ns).status.failed == 1


def dcgm_page(k, node):
    return requests.get(f"{k.sim.url}/metrics/dcgm/{node}", timeout=10).text


def sample(page, metric, **labels):
    for line in page.splitlines():
        if line.startswith(metric + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return line
    return None


def test_a_fatal_xid_takes_the_gpu_away_and_crashes_its_pod(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("trainer", 1, annotations={"kubesim.io/duration": "1h"}, node_selector=H100)
    )
    holder = running_pod(k, ns, "trainer")
    assert holder.metadata.annotations["kubesim.io/gpu-devices"] == "gpu-h100-0/0"
    assert k.core.read_node("gpu-h100-0").status.allocatable["nvidia.com/gpu"] == "2"

    status, answer = post(k, "gpu-h100-0/gpus/0/xid", {"code": 79})
    assert status == 200
    assert answer["healthy"] is False and answer["crashing"] == [f"{ns}/trainer"]
    node = k.core.read_node("gpu-h100-0")
    assert node.status.allocatable["nvidia.com/gpu"] == "1"
    assert node.status.capacity["nvidia.com/gpu"] == "2"  # the device plugin keeps capacity

    # For 30 s of the sim clock the exporter shows the XID on the GPU the pod still
    # holds (what names the job hit); then the pod's next CUDA call fails.
    line = sample(dcgm_page(k, "gpu-h100-0"), "DCGM_FI_DEV_XID_ERRORS", gpu="0")
    assert 'pod="trainer"' in line and line.endswith(" 79")
    assert k.core.read_namespaced_pod("trainer", ns).status.phase == "Running"
    k.advance(30)
    crashed = wait_for(
        lambda: (p := k.core.read_namespaced_pod("trainer", ns)).status.phase == "Failed" and p
    )
    assert crashed.status.container_statuses[0].state.terminated.finished_at == (
        parse_time(answer["crash_at"])
    )
    assert crashed.status.container_statuses[0].state.terminated.exit_code == 1
    assert condition(crashed, "DisruptionTarget") is None  # a crash, not a disruption
    log = k.core.read_namespaced_pod_log("trainer", ns)
    assert "CUDA error" in log and "Xid 79" in log and "exited with code 1" in log

    page = dcgm_page(k, "gpu-h100-0")
    line = sample(page, "DCGM_FI_DEV_XID_ERRORS", gpu="0")
    assert line.endswith(" 79")
    assert 'err_code="79",err_msg="GPU has fallen off the bus"' in line
    assert sample(page, "DCGM_FI_DEV_XID_ERRORS", gpu="1").endswith(" 0")
    assert 'err_msg="No Error"' in sample(page, "DCGM_FI_DEV_XID_ERRORS", gpu="1")
    count = sample(page, "DCGM_EXP_XID_ERRORS_COUNT", gpu="0", xid="79")
    assert count.endswith(" 1") and 'window_size_in_ms="300000"' in count

    # Two GPUs no longer fit; one does, on the healthy GPU.
    k.core.create_namespaced_pod(ns, pod("pair", 2, node_selector=H100))
    k.core.create_namespaced_pod(ns, pod("single", 1, node_selector=H100))
    placed = running_pod(k, ns, "single")
    assert placed.metadata.annotations["kubesim.io/gpu-devices"] == "gpu-h100-0/1"
    message = wait_for(
        lambda: (
            (c := condition(k.core.read_namespaced_pod("pair", ns), "PodScheduled"))
            and c.reason == "Unschedulable"
            and c.message
        )
    )
    assert "Insufficient nvidia.com/gpu" in message

    k.advance(301)  # out of the exporter's 5-minute count window; the last XID stays
    page = dcgm_page(k, "gpu-h100-0")
    assert sample(page, "DCGM_EXP_XID_ERRORS_COUNT", gpu="0") is None
    assert sample(page, "DCGM_FI_DEV_XID_ERRORS", gpu="0").endswith(" 79")


def test_an_application_xid_crashes_the_pod_but_keeps_the_gpu(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("buggy", 1, annotations={"kubesim.io/duration": "1h"}, node_selector=H100)
    )
    running_pod(k, ns, "buggy")
    status, answer = post(k, "gpu-h100-0/gpus/0/xid", {"code": 13})
    assert status == 200 and answer["healthy"] is True
    assert k.core.read_node("gpu-h100-0").status.allocatable["nvidia.com/gpu"] == "2"
    k.advance(30)
    wait_for(lambda: k.core.read_namespaced_pod("buggy", ns).status.phase == "Failed")


def test_an_xid_on_a_mig_gpu_takes_all_its_instances(k):
    before = k.core.read_node("gpu-mig-0").status.allocatable
    assert post(k, "gpu-mig-0/gpus/0/xid", {"code": 48})[0] == 200
    after = k.core.read_node("gpu-mig-0").status.allocatable
    mig = {key: value for key, value in before.items() if key.startswith("nvidia.com/mig-")}
    assert mig and all(after[key] == "0" for key in mig)


def test_xid_endpoint_rejects_bad_input(k):
    assert post(k, "gpu-h100-0/gpus/0/xid", {"code": "79"})[0] == 400
    assert post(k, "gpu-h100-0/gpus/0/xid", {"code": 0})[0] == 400
    assert post(k, "gpu-h100-0/gpus/0/xid", {})[0] == 400
    assert post(k, "gpu-h100-0/gpus/7/xid", {"code": 79})[0] == 404
    assert post(k, "cpu-0/gpus/0/xid", {"code": 79})[0] == 404
    assert post(k, "ghost/gpus/0/xid", {"code": 79})[0] == 404


def test_scheduling_gates_hold_a_pod_until_removed(k):
    ns = k.namespace()
    manifest = pod("gated", scheduling_gates=[{"name": "example.com/window"}])
    k.core.create_namespaced_pod(ns, manifest)
    created = k.core.read_namespaced_pod("gated", ns)
    scheduled = condition(created, "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "SchedulingGated")
    assert scheduled.message == "Scheduling is blocked due to non-empty scheduling gates"
    k.advance(60)
    assert k.core.read_namespaced_pod("gated", ns).spec.node_name is None
    if KUBECTL.exists():
        row = kubectl(k, "get", "pod", "gated", "-n", ns, "--no-headers").stdout.split()
        assert row[2] == "SchedulingGated"

    with pytest.raises(ApiException) as added:
        k.core.patch_namespaced_pod(
            "gated",
            ns,
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "more"}}],
        )
    assert added.value.status == 422
    assert "only deletion is allowed, but found new scheduling gate 'more'" in added.value.body

    k.core.patch_namespaced_pod("gated", ns, [{"op": "remove", "path": "/spec/schedulingGates"}])
    assert running_pod(k, ns, "gated").spec.node_name


def test_pod_logs_by_container_and_tail(k):
    ns = k.namespace()
    manifest = pod("pair", annotations={"kubesim.io/duration": "3m"})
    manifest["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    k.core.create_namespaced_pod(ns, manifest)
    running_pod(k, ns, "pair")
    k.advance(181)
    wait_for(lambda: k.core.read_namespaced_pod("pair", ns).status.phase == "Succeeded")
    with pytest.raises(ApiException) as which:
        k.core.read_namespaced_pod_log("pair", ns)
    assert which.value.status == 400
    assert json.loads(which.value.body)["message"] == (
        "a container name must be specified for pod pair, choose one of: [main sidecar]"
    )
    main = k.core.read_namespaced_pod_log("pair", ns, container="main")
    assert re.search(r"container main started\n.*step 1: 33% done\n", main)
    assert main.endswith("kubesim: container main exited with code 0\n")
    sidecar = k.core.read_namespaced_pod_log("pair", ns, container="sidecar", tail_lines=1)
    assert sidecar.endswith("kubesim: container sidecar exited with code 0\n")
    assert sidecar.count("\n") == 1
    with pytest.raises(ApiException) as wrong:
        k.core.read_namespaced_pod_log("pair", ns, container="nope")
    assert json.loads(wrong.value.body)["message"] == "container nope is not valid for pod pair"
    bad = requests.get(
        f"{k.sim.url}/api/v1/namespaces/{ns}/pods/pair/log?container=main&tailLines=-1",
        timeout=10,
    )
    assert bad.status_code == 422


def test_logs_of_a_pod_that_has_not_started(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("nowhere", node_selector={"no": "such-node"}))
    # No node: the apiserver has no kubelet to ask and streams nothing.
    assert k.core.read_namespaced_pod_log("nowhere", ns) == ""
    post(k, "cpu-1/condition", {"status": "Unknown"})
    k.core.create_namespaced_pod(ns, pod("stuck", node_name="cpu-1"))
    with pytest.raises(ApiException) as waiting:
        k.core.read_namespaced_pod_log("stuck", ns)
    assert waiting.value.status == 400
    assert json.loads(waiting.value.body)["message"] == (
        'container "main" in pod "stuck" is waiting to start: ContainerCreating'
    )


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl wheel not installed")
def test_kubectl_logs_and_delete_as_people_type_them(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("talk", annotations={"kubesim.io/duration": "2m"}))
    running_pod(k, ns, "talk")
    k.advance(121)
    wait_for(lambda: k.core.read_namespaced_pod("talk", ns).status.phase == "Succeeded")
    out = kubectl(k, "logs", "talk", "-n", ns, "--tail=1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("kubesim: container main exited with code 0")

    k.core.create_namespaced_pod(ns, pod("web", annotations={"kubesim.io/duration": "1h"}))
    running_pod(k, ns, "web")
    deleted = kubectl(k, "delete", "pod", "web", "-n", ns, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    row = kubectl(k, "get", "pod", "web", "-n", ns, "--no-headers").stdout.split()
    assert row[2] == "Terminating"


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl wheel not installed")
def test_kubectl_drain_cordons_and_evicts_through_the_eviction_api(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("web", annotations={"kubesim.io/duration": "1h"}, node_selector=CPU_NODE)
    )
    running_pod(k, ns, "web")
    drain = subprocess.Popen(
        [str(KUBECTL), "--kubeconfig", k.sim.kubeconfig_path, "drain", "cpu-0", "--force"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        evicted = wait_for(
            lambda: (p := k.core.read_namespaced_pod("web", ns)).metadata.deletion_timestamp and p,
            timeout=20,
        )
        assert condition(evicted, "DisruptionTarget").reason == "EvictionByEvictionAPI"
        k.advance(31)  # drain waits for the pod to be gone
        out, err = drain.communicate(timeout=30)
    finally:
        drain.kill()
    assert drain.returncode == 0, err
    assert "pod/web evicted" in out and "node/cpu-0 drained" in out
    assert k.core.read_node("cpu-0").spec.unschedulable
