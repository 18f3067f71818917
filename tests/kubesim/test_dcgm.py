"""The DCGM exporter page at GET /metrics: format, labels and values."""

import re
import urllib.request

import pytest

from kubesim.control import SMALL_CLUSTER
from kubesim.testing import running_kubesim
from tests.kubesim.simhelpers import Clients, pod, wait_for

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> tuple[dict, list]:
    """(types by metric, [(metric, labels, value)]) of Prometheus text format 0.0.4."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line.startswith("# HELP ") or not line:
            continue
        else:
            match = SAMPLE.match(line)
            assert match, f"unparseable line: {line!r}"
            name, labels, value = match.groups()
            samples.append((name, dict(LABEL.findall(labels)), float(value)))
    return types, samples


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def scrape(k):
    with urllib.request.urlopen(f"{k.sim.url}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(response.read().decode())


def series(samples, metric, **labels):
    return [
        (found, value)
        for name, found, value in samples
        if name == metric and all(found.get(key) == want for key, want in labels.items())
    ]


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
