"""Real kubectl against kubesim (the demo cluster with its control plane running)."""

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

KUBECTL = Path(sys.executable).parent / "kubectl"
pytestmark = pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl wheel not installed")

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: hello
  namespace: default
  labels: {app: hello}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: ["echo", "hi"]
"""
QUOTA = """\
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu, namespace: default}
spec:
  hard: {requests.nvidia.com/gpu: "%s"}
"""


@pytest.fixture
def kubectl(kubesim_cluster, tmp_path):
    def run(*args, stdin=None, check=True):
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", kubesim_cluster.kubeconfig_path, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    return run


def test_get_namespaces_and_nodes_print_like_a_cluster(kubectl):
    out = kubectl("get", "namespaces").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert ["kube-system", "Active"] in [line.split()[:2] for line in out.splitlines()]
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(nodes) > 1 and "Ready" in nodes[1]


def test_apply_get_describe_delete_a_job(kubectl):
    assert kubectl("apply", "-f", "-", stdin=JOB).stdout.strip() == "job.batch/hello created"
    assert kubectl("apply", "-f", "-", stdin=JOB).stdout.strip() == "job.batch/hello unchanged"
    changed = JOB.replace("{app: hello}", "{app: hello, team: a}")
    assert kubectl("apply", "-f", "-", stdin=changed).stdout.strip() == "job.batch/hello configured"

    table = kubectl("get", "jobs").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table[1].split()[:3] == ["hello", "Suspended", "0/1"]

    job = yaml.safe_load(kubectl("get", "job", "hello", "-o", "yaml").stdout)
    assert job["metadata"]["labels"] == {"app": "hello", "team": "a"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in job["metadata"]["annotations"]
    assert job["spec"]["backoffLimit"] == 6

    described = kubectl("describe", "job", "hello").stdout
    assert "Name:             hello" in described
    assert "Completion Mode:  NonIndexed" in described

    assert "deleted" in kubectl("delete", "job", "hello").stdout
    missing = kubectl("get", "job", "hello", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): jobs.batch "hello" not found' in missing.stderr


def test_server_side_apply_and_conflicts(kubectl):
    assert (
        "serverside-applied" in kubectl("apply", "--server-side", "-f", "-", stdin=QUOTA % 4).stdout
    )
    conflict = kubectl(
        "apply", "--server-side", "--field-manager=ops", "-f", "-", stdin=QUOTA % 8, check=False
    )
    assert conflict.returncode == 1
    assert 'conflict with "kubectl"' in conflict.stderr
    kubectl(
        "apply",
        "--server-side",
        "--field-manager=ops",
        "--force-conflicts",
        "-f",
        "-",
        stdin=QUOTA % 8,
    )
    quota = yaml.safe_load(kubectl("get", "quota", "gpu", "-o", "yaml").stdout)
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}


def test_invalid_manifest_is_rejected_like_a_real_server(kubectl):
    bad = JOB.replace("restartPolicy: Never", "restartPolicy: Always")
    result = kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert result.returncode == 1
    assert 'The Job "hello" is invalid' in result.stderr
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in result.stderr


def test_create_from_file_and_delete_namespace(kubectl):
    kubectl(
        "create", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"
    )
    kubectl(
        "apply",
        "-n",
        "team-a",
        "-f",
        "-",
        stdin=JOB.replace("namespace: default", "namespace: team-a"),
    )
    assert "hello" in kubectl("get", "jobs", "-A").stdout
    kubectl("delete", "namespace", "team-a")
    assert "team-a" not in kubectl("get", "namespaces").stdout
    assert "No resources found" in kubectl("get", "jobs", "-A").stderr


def test_wait_for_a_job_to_complete(kubectl):
    """kubectl 1.37 watches with sendInitialEvents and waits for the end-of-list bookmark."""
    job = JOB.replace("suspend: true", "suspend: false").replace(
        "    spec:\n      restartPolicy",
        "    metadata: {annotations: {kubesim.io/duration: 1s}}\n    spec:\n      restartPolicy",
    )
    kubectl("apply", "-f", "-", stdin=job)
    waited = kubectl("wait", "--for=condition=complete", "job/hello", "--timeout=20s")
    assert waited.stdout.strip() == "job.batch/hello condition met"


def test_get_watch_prints_full_rows_for_changes(kubectl, kubesim_cluster):
    watcher = subprocess.Popen(
        [str(KUBECTL), "--kubeconfig", kubesim_cluster.kubeconfig_path, "get", "jobs", "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in watcher.stdout], daemon=True).start()
    try:
        deadline = time.monotonic() + 20
        while not any(e["verb"] == "watch" for e in list(kubesim_cluster.request_log)):
            assert time.monotonic() < deadline, "kubectl never started watching"
            time.sleep(0.05)
        kubectl("apply", "-f", "-", stdin=JOB)  # arrives as a watch event, not in the list
        seen = []
        while not any(row[:3] == ["hello", "Suspended", "0/1"] for row in seen):
            seen.append(lines.get(timeout=20).split())
    finally:
        watcher.kill()
        watcher.wait()
    assert all(len(row) >= 4 for row in seen), seen  # NAME STATUS COMPLETIONS [DURATION] AGE


def test_create_generators_send_protobuf_and_work(kubectl, kubesim_cluster):
    """kubectl's typed clients send application/vnd.kubernetes.protobuf bodies."""
    kubectl("create", "namespace", "team-x")
    kubectl("create", "job", "hello", "--image=busybox:1.36", "-n", "team-x", "--", "echo", "hi")
    kubectl("create", "quota", "gpu", "--hard=requests.nvidia.com/gpu=4,pods=10", "-n", "team-x")
    kubectl(
        "create", "role", "reader", "--verb=get,list", "--resource=pods,jobs.batch", "-n", "team-x"
    )
    kubectl(
        "create",
        "rolebinding",
        "readers",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=team-x:ci",
        "-n",
        "team-x",
    )
    posts = [e for e in kubesim_cluster.request_log if e["method"] == "POST"]
    assert [(e["resource"], e["status"]) for e in posts] == [
        ("namespaces", 201),
        ("jobs", 201),
        ("resourcequotas", 201),
        ("roles", 201),
        ("rolebindings", 201),
    ]
    store = kubesim_cluster.store
    job = store.get("jobs", "team-x", "hello")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["command"]) == (
        "hello",
        "busybox:1.36",
        ["echo", "hi"],
    )
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    quota = store.get("resourcequotas", "team-x", "gpu")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "4", "pods": "10"}
    role = store.get("roles", "team-x", "reader")
    assert role["rules"] == [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["get", "list"], "apiGroups": ["batch"], "resources": ["jobs"]},
    ]
    binding = store.get("rolebindings", "team-x", "readers")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "reader",
    }
    assert binding["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
        {"kind": "ServiceAccount", "name": "ci", "namespace": "team-x"},
    ]


def test_drain_cordons_and_removes_the_pods(kubectl, kubesim_cluster):
    kubectl("create", "job", "long", "--image=busybox:1.36", "--", "sleep", "1000")
    deadline = time.monotonic() + 20
    while True:
        pods = kubesim_cluster.store.list("pods", "default")
        if pods and pods[0]["spec"].get("nodeName"):
            break
        assert time.monotonic() < deadline, "the job's pod was never scheduled"
        time.sleep(0.05)
    node, name = pods[0]["spec"]["nodeName"], pods[0]["metadata"]["name"]
    drain = subprocess.Popen(
        [str(KUBECTL), "--kubeconfig", kubesim_cluster.kubeconfig_path]
        + ["drain", node, "--force", "--timeout=60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # the evicted pod has its 30 s grace period on the sim clock: skip through it
        while drain.poll() is None:
            kubesim_cluster.clock.advance(10)
            time.sleep(0.2)
    finally:
        drain.kill()
        out, err = drain.communicate()
    assert drain.returncode == 0, err
    assert f"node/{node} drained" in out
    evictions = [e for e in kubesim_cluster.request_log if e["subresource"] == "eviction"]
    assert [(e["name"], e["status"]) for e in evictions] == [(name, 201)]  # a protobuf body
    assert kubesim_cluster.store.get("nodes", None, node)["spec"]["unschedulable"] is True
    assert name not in [p["metadata"]["name"] for p in kubesim_cluster.store.list("pods")]


def test_get_pages_with_chunk_size(kubectl, kubesim_cluster):
    for index in range(5):
        kubectl("create", "namespace", f"page-{index}")
    kubesim_cluster.request_log.clear()
    out = kubectl("get", "namespaces", "--chunk-size=2", "-o", "name").stdout.split()
    assert [n for n in out if n.startswith("namespace/page-")] == [
        f"namespace/page-{i}" for i in range(5)
    ]
    lists = [e for e in kubesim_cluster.request_log if e["verb"] == "list"]
    assert len(lists) == (len(kubesim_cluster.store.list("namespaces")) + 1) // 2  # two a page
