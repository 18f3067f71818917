"""GET /metrics/kube-state-metrics: the families billing joins on, with kube-state-metrics'
label names, label order, units and value formats."""

import re
import subprocess
import sys

import pytest

from kubesim.exporters import ksm
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim import promtext
from tests.kubesim.promtext import series
from tests.kubesim.simhelpers import Clients, job, pod, wait_for

PORTAL = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def scrape(k):
    return promtext.scrape(f"{k.sim.url}/metrics/kube-state-metrics")


def phase(k, ns, name):
    return k.core.read_namespaced_pod(name, ns).status.phase


def team_namespace(k):
    ns = k.namespace("team")
    k.core.patch_namespace(ns, {"metadata": {"labels": {**PORTAL, "unlisted": "x"}}})
    return ns


def test_gpu_requests_follow_the_pod_through_its_phases(k):
    ns = team_namespace(k)
    manifest = pod("train", 2, {"kubesim.io/duration": "10m"})
    manifest["metadata"]["labels"] = {**PORTAL, "unlisted": "x"}
    manifest["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    k.core.create_namespaced_pod(ns, manifest)
    wait_for(lambda: phase(k, ns, "train") == "Running")
    uid = k.core.read_namespaced_pod("train", ns).metadata.uid

    types, samples = scrape(k)
    assert types["kube_pod_container_resource_requests"] == "gauge"
    ((labels, value),) = series(
        samples, "kube_pod_container_resource_requests", pod="train", resource="nvidia_com_gpu"
    )
    assert labels == {
        "namespace": ns,
        "pod": "train",
        "uid": uid,
        "container": "main",
        "node": "gpu-h100-0",
        "resource": "nvidia_com_gpu",
        "unit": "integer",
    }
    assert value == 2
    running = {
        labels["phase"]: value
        for labels, value in series(samples, "kube_pod_status_phase", pod="train")
    }
    assert running == {"Pending": 0, "Running": 1, "Succeeded": 0, "Failed": 0, "Unknown": 0}
    ((labels, _),) = series(samples, "kube_pod_labels", pod="train")
    assert {key: v for key, v in labels.items() if key.startswith("label_")} == {
        "label_app_kubernetes_io_managed_by": "gpu-portal",
        "label_gpu_portal_io_team": "vision",
    }
    ((labels, started),) = series(samples, "kube_pod_start_time", pod="train")
    assert started == k.core.read_namespaced_pod("train", ns).status.start_time.timestamp()
    assert not series(samples, "kube_pod_completion_time", pod="train")

    k.advance(11 * 60)
    wait_for(lambda: phase(k, ns, "train") == "Succeeded")
    _, samples = scrape(k)
    # Still emitted after the pod finished: billing must join on the phase.
    assert series(samples, "kube_pod_container_resource_requests", pod="train", unit="integer")
    ((_, succeeded),) = series(samples, "kube_pod_status_phase", pod="train", phase="Succeeded")
    ((_, finished),) = series(samples, "kube_pod_completion_time", pod="train")
    assert succeeded == 1 and finished >= started + 600


def test_label_order_and_value_format_are_kube_state_metrics(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("mig", 1, {"kubesim.io/duration": "1h"}, resource="nvidia.com/mig-1g.10gb")
    )
    wait_for(lambda: phase(k, ns, "mig") == "Running")
    text = promtext.scrape_text(f"{k.sim.url}/metrics/kube-state-metrics")
    lines = [line for line in text.splitlines() if f'namespace="{ns}",pod="mig"' in line]
    info = next(line for line in lines if line.startswith("kube_pod_info{"))
    keys = re.findall(r'([a-z_]+)="', info)
    assert keys == [
        "namespace", "pod", "uid", "host_ip", "pod_ip", "node",
        "created_by_kind", "created_by_name", "priority_class", "host_network",
    ]  # fmt: skip
    request = next(
        line for line in lines if line.startswith("kube_pod_container_resource_requests{")
    )
    assert re.findall(r'([a-z_]+)="', request) == [
        "namespace", "pod", "uid", "container", "node", "resource", "unit",
    ]  # fmt: skip
    assert 'resource="nvidia_com_mig_1g_10gb",unit="integer"} 1' in request
    # Timestamps as Go prints float64 with %g.
    start = next(line for line in lines if line.startswith("kube_pod_start_time{"))
    assert re.search(r"} \d\.\d+e\+09$", start)
    owner = next(line for line in lines if line.startswith("kube_pod_owner{"))
    assert owner.endswith('owner_kind="<none>",owner_name="<none>",owner_is_controller="<none>"} 1')


def test_a_pod_that_cannot_be_scheduled_has_no_node(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("huge", 64))
    wait_for(lambda: k.core.read_namespaced_pod("huge", ns).status.conditions)
    _, samples = scrape(k)
    ((labels, value),) = series(
        samples, "kube_pod_container_resource_requests", namespace=ns, resource="nvidia_com_gpu"
    )
    assert labels["node"] == "" and value == 64
    ((_, pending),) = series(samples, "kube_pod_status_phase", namespace=ns, phase="Pending")
    assert pending == 1


def test_job_status_families(k):
    ns = k.namespace()
    k.batch.create_namespaced_job(ns, job("nightly", 1, {"kubesim.io/duration": "5m"}))
    wait_for(lambda: (k.batch.read_namespaced_job("nightly", ns).status.active or 0) == 1)
    # The run starts after ContainerCreating: its 5 minutes count from there.
    wait_for(lambda: [p.status.phase for p in k.core.list_namespaced_pod(ns).items] == ["Running"])
    _, samples = scrape(k)
    ((_, active),) = series(samples, "kube_job_status_active", namespace=ns, job_name="nightly")
    assert active == 1
    assert series(samples, "kube_job_status_start_time", namespace=ns, job_name="nightly")
    assert not series(samples, "kube_job_status_completion_time", namespace=ns)
    ((labels, _),) = series(samples, "kube_pod_owner", namespace=ns)
    assert (labels["owner_kind"], labels["owner_name"], labels["owner_is_controller"]) == (
        "Job",
        "nightly",
        "true",
    )

    k.advance(6 * 60)
    wait_for(lambda: k.batch.read_namespaced_job("nightly", ns).status.succeeded == 1)
    _, samples = scrape(k)
    values = {
        name: value
        for name in (
            "kube_job_status_active",
            "kube_job_status_succeeded",
            "kube_job_status_failed",
        )
        for _, value in series(samples, name, namespace=ns, job_name="nightly")
    }
    assert values == {
        "kube_job_status_active": 0,
        "kube_job_status_succeeded": 1,
        "kube_job_status_failed": 0,
    }
    complete = {
        labels["condition"]: value
        for labels, value in series(samples, "kube_job_complete", namespace=ns)
    }
    assert complete == {"true": 1, "false": 0, "unknown": 0}
    assert series(samples, "kube_job_status_completion_time", namespace=ns, job_name="nightly")


def test_nodes_namespaces_and_quotas(k):
    ns = team_namespace(k)
    k.core.create_namespaced_resource_quota(
        ns,
        {
            "metadata": {"name": "gpu-quota"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.cpu": "1500m"}},
        },
    )
    _, samples = scrape(k)
    ((labels, _),) = series(samples, "kube_node_labels", node="gpu-l4-0")
    assert labels["label_nvidia_com_gpu_product"] == "NVIDIA-L4"
    assert labels["label_nvidia_com_gpu_count"] == "2"
    assert labels["label_karpenter_sh_capacity_type"] == "spot"
    assert "label_kubernetes_io_hostname" not in labels  # not allowlisted
    ((_, gpus),) = series(
        samples, "kube_node_status_allocatable", node="gpu-l4-0", resource="nvidia_com_gpu"
    )
    ((_, mig),) = series(
        samples, "kube_node_status_allocatable", node="gpu-mig-0", resource="nvidia_com_mig_1g_10gb"
    )
    assert (gpus, mig) == (2, 2)
    quota = {
        (labels["resource"], labels["type"]): value
        for labels, value in series(samples, "kube_resourcequota", namespace=ns)
    }
    assert quota == {
        ("requests.nvidia.com/gpu", "hard"): 4,
        ("requests.nvidia.com/gpu", "used"): 0,
        ("requests.cpu", "hard"): 1.5,
        ("requests.cpu", "used"): 0,
    }
    ((labels, _),) = series(samples, "kube_namespace_labels", namespace=ns)
    assert labels == {
        "namespace": ns,
        "label_app_kubernetes_io_managed_by": "gpu-portal",
        "label_gpu_portal_io_team": "vision",
    }


def test_the_allowlist_is_configurable(k):
    exporters = k.sim.control_plane.exporters
    try:
        exporters.ksm_allowlist = ksm.parse_allowlist("nodes=[*],pods=[]")
        _, samples = scrape(k)
        ((labels, _),) = series(samples, "kube_node_labels", node="cpu-0")
        assert labels["label_kubernetes_io_hostname"] == "cpu-0"
        assert not series(samples, "kube_pod_labels")
        assert not series(samples, "kube_namespace_labels")
    finally:
        exporters.ksm_allowlist = ksm.DEFAULT_ALLOWLIST


def test_a_bad_allowlist_stops_the_command_line_with_a_message():
    result = subprocess.run(
        [sys.executable, "-m", "kubesim", "--metric-labels-allowlist", "pods=gpu-portal.io/team"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "metric labels allowlist: cannot parse 'pods=gpu-portal.io/team'" in result.stderr
