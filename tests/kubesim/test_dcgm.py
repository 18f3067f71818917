"""The DCGM exporter pages (GET /metrics and /metrics/dcgm/{node}): format, labels,
values, and the file_sd targets listing them."""

import json
import re
import urllib.error
import urllib.request

import pytest

from kubesim import cluster
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim import promtext
from tests.kubesim.promtext import series
from tests.kubesim.simhelpers import Clients, pod, wait_for


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def scrape(k, path="/metrics"):
    return promtext.scrape(k.sim.url + path)


def test_every_gpu_and_mig_instance_is_exported_with_types(k):
    types, samples = scrape(k)
    assert types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert types["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == "gauge"
    assert types["DCGM_FI_DEV_XID_ERRORS"] == "gauge"
    util = series(samples, "DCGM_FI_DEV_GPU_UTIL")
    # 2 H100 + 2 L4 + 4 MIG instances (all-balanced: 2x 1g.10gb, 2g.20gb, 3g.40gb)
    assert len(util) == 8
    h100 = series(samples, "DCGM_FI_DEV_GPU_UTIL", Hostname="gpu-h100-0", gpu="1")
    labels, _ = h100[0]
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["device"] == "nvidia1"
    assert re.fullmatch(r"GPU-[0-9a-f-]{36}", labels["UUID"])
    assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:00\.0", labels["pci_bus_id"])
    mig = series(samples, "DCGM_FI_DEV_FB_FREE", Hostname="gpu-mig-0", GPU_I_PROFILE="3g.40gb")
    assert len(mig) == 1 and mig[0][0]["GPU_I_ID"]
    assert mig[0][1] == 40192


def test_uuids_are_stable_across_scrapes(k):
    first = {labels["UUID"] for _, labels, _ in scrape(k)[1]}
    second = {labels["UUID"] for _, labels, _ in scrape(k)[1]}
    assert first == second and len(first) == 5  # 2 + 2 GPUs and one MIG-split A100


def test_held_devices_carry_the_pod_and_its_utilisation(k):
    ns = k.namespace()
    selector = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    annotations = {"kubesim.io/gpu-profile": "busy", "kubesim.io/duration": "1h"}
    k.core.create_namespaced_pod(ns, pod("busy", 1, annotations, node_selector=selector))
    idle = {"kubesim.io/gpu-profile": "idle"}
    k.core.create_namespaced_pod(ns, pod("mig-idle", 1, idle, resource="nvidia.com/mig-1g.10gb"))
    wait_for(lambda: k.core.read_namespaced_pod("busy", ns).status.phase == "Running")
    wait_for(lambda: k.core.read_namespaced_pod("mig-idle", ns).status.phase == "Running")
    _, samples = scrape(k)

    ((labels, active),) = series(samples, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", pod="busy")
    where = (labels["namespace"], labels["container"], labels["Hostname"])
    assert where == (ns, "main", "gpu-l4-0")
    assert 0.85 <= active <= 0.95
    ((_, util),) = series(samples, "DCGM_FI_DEV_GPU_UTIL", pod="busy")
    assert 85 <= util <= 95
    ((_, used),) = series(samples, "DCGM_FI_DEV_FB_USED", pod="busy")
    ((_, free),) = series(samples, "DCGM_FI_DEV_FB_FREE", pod="busy")
    assert used + free == 23034 and used > 0

    ((labels, active),) = series(samples, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", pod="mig-idle")
    assert labels["GPU_I_PROFILE"] == "1g.10gb" and active == 0
    ((_, util),) = series(samples, "DCGM_FI_DEV_GPU_UTIL", pod="mig-idle")
    assert util == 0  # GPU_UTIL reads 0 on MIG instances

    # Unallocated GPUs read 0 and name no pod.
    free_gpu = series(samples, "DCGM_FI_DEV_GPU_UTIL", Hostname="gpu-l4-0", gpu="1")
    ((labels, value),) = free_gpu
    assert value == 0 and "pod" not in labels


def test_xid_errors_hold_the_last_code(k):
    k.core.patch_node("gpu-h100-0", {"metadata": {"annotations": {"kubesim.io/xid": "79"}}})
    try:
        _, samples = scrape(k)
        values = [v for _, v in series(samples, "DCGM_FI_DEV_XID_ERRORS", Hostname="gpu-h100-0")]
        assert values == [79, 79]
    finally:
        k.core.patch_node("gpu-h100-0", {"metadata": {"annotations": {"kubesim.io/xid": None}}})


def test_pods_bound_by_node_name_still_get_devices(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("pinned", 1, node_name="gpu-h100-0"))
    wait_for(lambda: k.core.read_namespaced_pod("pinned", ns).status.phase == "Running")
    _, samples = scrape(k)
    ((labels, _),) = series(samples, "DCGM_FI_DEV_GPU_UTIL", pod="pinned")
    assert labels["Hostname"] == "gpu-h100-0"


def test_each_gpu_node_serves_its_own_exporter_page(k):
    _, everything = scrape(k)
    pages = {}
    for node in ("gpu-h100-0", "gpu-l4-0", "gpu-mig-0"):
        types, samples = scrape(k, f"/metrics/dcgm/{node}")
        assert {labels["Hostname"] for _, labels, _ in samples} == {node}
        assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
        pages[node] = samples
    util = [s for s in everything if s[0] == "DCGM_FI_DEV_GPU_UTIL"]
    per_node = [s for samples in pages.values() for s in samples if s[0] == "DCGM_FI_DEV_GPU_UTIL"]
    assert sorted(labels["UUID"] for _, labels, _ in per_node) == sorted(
        labels["UUID"] for _, labels, _ in util
    )


def test_nodes_without_an_exporter_are_404(k):
    for path in ("/metrics/dcgm/cpu-0", "/metrics/dcgm/no-such-node", "/metrics/nothing"):
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(k.sim.url + path, timeout=5)
        assert raised.value.code == 404


def test_values_are_printed_as_the_exporter_prints_them(k):
    text = promtext.scrape_text(f"{k.sim.url}/metrics/dcgm/gpu-h100-0")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    # Double fields with %f (six decimals), integer fields with %d.
    for line in lines:
        name, value = line.split("{", 1)[0], line.rsplit(" ", 1)[1]
        if name.startswith("DCGM_FI_PROF_") or name == "DCGM_FI_DEV_POWER_USAGE":
            assert re.fullmatch(r"\d+\.\d{6}", value), line
        else:
            assert re.fullmatch(r"\d+", value), line
    names = {line.split("{", 1)[0] for line in lines}
    assert {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_SM_CLOCK",
    } <= names


def test_energy_counter_grows_with_time_and_load():
    with running_kubesim(SMALL_CLUSTER) as sim:
        k = Clients(sim)
        ns = k.namespace()
        selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        annotations = {"kubesim.io/gpu-util": "100", "kubesim.io/duration": "2h"}
        k.core.create_namespaced_pod(ns, pod("hot", 1, annotations, node_selector=selector))
        wait_for(lambda: k.core.read_namespaced_pod("hot", ns).status.phase == "Running")

        def energy():
            _, samples = scrape(k, "/metrics/dcgm/gpu-h100-0")
            found = series(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            return {labels.get("pod"): value for labels, value in found}

        before = energy()
        k.advance(60)
        after = energy()
        # ~700 W for 60 s on the busy GPU against ~70 W on the idle one (in mJ).
        assert 600 * 60_000 <= after["hot"] - before["hot"] <= 720 * 61_000
        assert 60 * 60_000 <= after[None] - before[None] <= 75 * 61_000
        _, samples = scrape(k, "/metrics/dcgm/gpu-h100-0")
        ((_, tensor),) = series(samples, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", pod="hot")
        ((_, clock),) = series(samples, "DCGM_FI_DEV_SM_CLOCK", pod="hot")
        assert tensor > 0.5 and clock == 1980


def test_file_sd_lists_one_target_per_gpu_node(k, tmp_path):
    with urllib.request.urlopen(f"{k.sim.url}/metrics/dcgm-targets.json", timeout=5) as response:
        served = json.loads(response.read())
    path = tmp_path / "dcgm.json"
    k.sim.control_plane.exporters.keep_file_sd(str(path), f"127.0.0.1:{k.sim.port}")
    written = json.loads(path.read_text())
    paths = sorted(group["labels"]["__metrics_path__"] for group in written)
    assert paths == [
        "/metrics/dcgm/gpu-h100-0",
        "/metrics/dcgm/gpu-l4-0",
        "/metrics/dcgm/gpu-mig-0",
    ]
    assert [g["labels"] for g in served] == [g["labels"] for g in written]
    assert {tuple(group["targets"]) for group in written} == {(f"127.0.0.1:{k.sim.port}",)}

    # A GPU node joining is written out by the control loop.
    node = cluster.build_node(
        {"name": "extra", "gpu": {"model": "L4", "count": 1}},
        0,
        kubelet_version="v1.31.4",
        zone="a",
    )
    k.core.create_node(node)
    try:
        wait_for(lambda: "/metrics/dcgm/extra-0" in path.read_text())
    finally:
        k.core.delete_node("extra-0")
    wait_for(lambda: "/metrics/dcgm/extra-0" not in path.read_text())


def test_framebuffer_level_and_constant_load_from_annotations(k):
    ns = k.namespace()
    annotations = {
        "kubesim.io/gpu-profile": "constant",
        "kubesim.io/gpu-util": "35",
        "kubesim.io/gpu-fb-used": "12000",
        "kubesim.io/duration": "1h",
    }
    mig = "nvidia.com/mig-3g.40gb"
    k.core.create_namespaced_pod(ns, pod("steady", 1, annotations, resource=mig))
    wait_for(lambda: k.core.read_namespaced_pod("steady", ns).status.phase == "Running")
    _, samples = scrape(k, "/metrics/dcgm/gpu-mig-0")
    ((_, used),) = series(samples, "DCGM_FI_DEV_FB_USED", pod="steady")
    ((_, free),) = series(samples, "DCGM_FI_DEV_FB_FREE", pod="steady")
    ((_, active),) = series(samples, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", pod="steady")
    assert (used, free, active) == (12000, 40192 - 12000, 0.35)


SHARED_CLUSTER = """
name: shared
nodePools:
  - name: t4
    namePrefix: gpu-t4
    gpu: {model: T4, count: 1, replicas: 4}
"""


def test_a_time_sliced_gpu_is_one_device_copied_to_each_pod_sharing_it(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(SHARED_CLUSTER)
    with running_kubesim(str(path)) as sim:
        k = Clients(sim)
        node = k.core.read_node("gpu-t4-0")
        labels = node.metadata.labels
        assert labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
        assert labels["nvidia.com/gpu.replicas"] == "4"
        assert labels["nvidia.com/gpu.count"] == "1"
        assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
        assert node.status.allocatable["nvidia.com/gpu"] == "4"

        _, samples = scrape(k, "/metrics/dcgm/gpu-t4-0")
        ((labels, value),) = series(samples, "DCGM_FI_DEV_GPU_UTIL")
        assert value == 0 and labels["modelName"] == "Tesla T4" and "pod" not in labels

        ns = k.namespace()
        for name, util in (("a", "30"), ("b", "40")):
            annotations = {
                "kubesim.io/gpu-profile": "constant",
                "kubesim.io/gpu-util": util,
                "kubesim.io/gpu-fb-used": "2000",
                "kubesim.io/duration": "1h",
            }
            k.core.create_namespaced_pod(ns, pod(name, 1, annotations))
        for name in ("a", "b"):
            wait_for(
                lambda name=name: k.core.read_namespaced_pod(name, ns).status.phase == "Running"
            )
        _, samples = scrape(k, "/metrics/dcgm/gpu-t4-0")
        rows = series(samples, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        # One GPU, one UUID; its values copied to each pod, none left without a pod.
        assert sorted(labels["pod"] for labels, _ in rows) == ["a", "b"]
        assert len({labels["UUID"] for labels, _ in rows}) == 1
        assert [value for _, value in rows] == [0.7, 0.7]
        assert [v for _, v in series(samples, "DCGM_FI_DEV_FB_USED")] == [4000, 4000]
        energy = series(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        assert energy[0][1] == energy[1][1]

        _, ksm_samples = promtext.scrape(f"{sim.url}/metrics/kube-state-metrics")
        ((labels, _),) = series(ksm_samples, "kube_node_labels", node="gpu-t4-0")
        assert labels["label_nvidia_com_gpu_product"] == "Tesla-T4-SHARED"
        assert labels["label_nvidia_com_gpu_replicas"] == "4"
