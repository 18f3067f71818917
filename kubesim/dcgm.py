"""DCGM exporter text for every simulated GPU and MIG instance (pure, but for the
energy counter, which integrates power over time in an `EnergyMeter`).

The output follows dcgm-exporter: `# HELP` / `# TYPE` per metric, one sample per
device with the labels gpu, UUID, pci_bus_id, device, modelName (MIG adds
GPU_I_PROFILE and GPU_I_ID), Hostname, DCGM_FI_DRIVER_VERSION and, for a device a pod
holds, container/namespace/pod. Values are printed as the exporter prints them:
integer fields with `%d`, double fields with `%f` (`0.912000`).

The exporter runs as a DaemonSet, one target per GPU node: `render_node` is the page
of one node (`/metrics/dcgm/{node}`), `render` the pages of all nodes together
(`/metrics`, kept for existing users).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from datetime import datetime

from kubesim import exposition, kubelet, xid
from kubesim.cluster import GPU_MODELS, Device, node_devices
from kubesim.exposition import Family
from kubesim.scheduler import held_device_keys

DRIVER_VERSION = "550.90.07"
XID_ANNOTATION = "kubesim.io/xid"
EXPORTER_PORT = 9400
EXPORTER_NAMESPACE = "gpu-operator"


@dataclass(frozen=True)
class Field:
    family: Family
    integer: bool  # DCGM_FT_INT64 prints with %d, DCGM_FT_DOUBLE with %f


def _field(name: str, kind: str, help_text: str, integer: bool) -> Field:
    return Field(Family(name, kind, help_text), integer)


# In the order of dcgm-exporter's default counters file (dcp-metrics-included.csv).
FIELDS = [
    _field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM frequency (in MHz).", True),
    _field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", True),
    _field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", False),
    _field(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        True,
    ),
    _field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", True),
    _field("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", True),
    _field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", True),
    _field("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", True),
    _field(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        False,
    ),
    _field(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        False,
    ),
    _field(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        False,
    ),
]
XID_COUNT = Family(
    "DCGM_EXP_XID_ERRORS_COUNT",
    "gauge",
    "Count of XID Errors within user-specified time window (see xid-count-window-size param).",
)
FAMILIES = [field.family for field in FIELDS] + [XID_COUNT]
POD_LABELS = ("namespace", "pod", "container")

# modelName -> SM clock (idle MHz, max boost MHz).
SM_CLOCKS = {
    "NVIDIA H100 80GB HBM3": (345, 1980),
    "NVIDIA A100-SXM4-80GB": (210, 1410),
    "NVIDIA A100-SXM4-40GB": (210, 1410),
    "NVIDIA L4": (210, 2040),
    "Tesla T4": (300, 1590),
}


def format_value(field: Field, value: float) -> str:
    return str(int(value)) if field.integer else f"{value:f}"


class EnergyMeter:
    """DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION per device: power integrated over time
    (mJ since the node booted), so the counter only goes up between scrapes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._readings: dict[str, tuple[float, float]] = {}  # key -> (time, mJ)

    def read(self, key: str, now: float, watts: float, idle_watts: float, boot: float) -> int:
        with self._lock:
            last = self._readings.get(key)
            if last is None:
                # Before the first reading the device sat idle since boot.
                energy = idle_watts * max(now - boot, 0.0) * 1000
            else:
                at, energy = last
                energy += watts * max(now - at, 0.0) * 1000
                now = max(now, at)
            self._readings[key] = (now, energy)
            return int(energy)


def _holders(pods: list[dict]) -> dict[str, dict]:
    """device key -> running pod holding it."""
    holders = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Running":
            for key in held_device_keys(pod):
                holders[key] = pod
    return holders


def _container_for(pod: dict, resource: str) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        if resource in (resources.get("limits") or {}) or resource in (
            resources.get("requests") or {}
        ):
            return container["name"]
    return containers[0]["name"] if containers else ""


def _model(model_name: str) -> dict:
    for model in GPU_MODELS.values():
        if model["model_name"] == model_name:
            return model
    return {"power": (30.0, 300.0)}


def _mig_share(device: Device) -> float:
    if device.mig_profile:
        return int(device.mig_profile.split("g.", 1)[0]) / 7
    return 1.0


def device_values(
    device: Device,
    pod: dict | None,
    now: datetime,
    xid: int,
    energy_mj: int = 0,
    utilisation: float | None = None,
) -> dict:
    """The metric values of one device at `now` (numbers, not yet formatted)."""
    if utilisation is None:
        utilisation = kubelet.gpu_utilisation(pod, now, device.key) if pod else 0.0
    used = kubelet.framebuffer_used(pod, device.memory_mib, utilisation) if pod else 0
    power = device_power(device, utilisation, now)
    temperature = 31 + 45 * utilisation + kubelet.noise(device.key + "/temp", now, 1.5)
    idle_clock, max_clock = SM_CLOCKS.get(device.model_name, (210, 1410))
    return {
        "DCGM_FI_DEV_SM_CLOCK": max_clock if utilisation > 0.01 else idle_clock,
        "DCGM_FI_DEV_GPU_TEMP": round(temperature),
        "DCGM_FI_DEV_POWER_USAGE": round(max(power, 0.0), 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy_mj,
        # DCGM reports 0 GPU_UTIL on MIG instances; only the profiling metrics work there.
        "DCGM_FI_DEV_GPU_UTIL": 0 if device.mig_profile else round(utilisation * 100),
        "DCGM_FI_DEV_XID_ERRORS": xid,
        "DCGM_FI_DEV_FB_FREE": device.memory_mib - used,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(utilisation, 6),
        # A training step keeps the tensor cores busy ~60 % and memory ~45 % of the
        # time the engine is active.
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(utilisation * 0.6, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": round(utilisation * 0.45, 6),
    }


def device_power(device: Device, utilisation: float, now: datetime) -> float:
    idle_watts, max_watts = _model(device.model_name)["power"]
    share = _mig_share(device)
    power = (idle_watts + (max_watts - idle_watts) * utilisation) * share
    return power + kubelet.noise(device.key + "/power", now, 2.0 * share)


def device_labels(device: Device, pod: dict | None, pod_labels=POD_LABELS) -> list[tuple]:
    labels = [
        ("gpu", str(device.gpu)),
        ("UUID", device.uuid),
        ("pci_bus_id", device.pci_bus_id),
        ("device", f"nvidia{device.gpu}"),
        ("modelName", device.model_name),
    ]
    if device.mig_profile:
        labels += [("GPU_I_PROFILE", device.mig_profile), ("GPU_I_ID", str(device.gpu_instance_id))]
    labels += [("Hostname", device.node), ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION)]
    if pod:
        namespace_label, pod_label, container_label = pod_labels
        labels += [
            (container_label, _container_for(pod, device.resource)),
            (namespace_label, pod["metadata"]["namespace"]),
            (pod_label, pod["metadata"]["name"]),
        ]
    return labels


def _xid(node: dict, pod: dict | None, gpu: int) -> int:
    last = xid.last_code(node, gpu)
    if last:
        return last
    for obj in (pod, node):
        value = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(XID_ANNOTATION)
        if value:
            try:
                return int(value)
            except ValueError:
                pass
    return 0


def _boot_time(node: dict, now: datetime) -> float:
    created = node["metadata"].get("creationTimestamp")
    if created:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    return now.timestamp()


def node_rows(
    node: dict, holders: dict[str, dict], now: datetime, meter: EnergyMeter, pod_labels=POD_LABELS
) -> list[tuple[list, dict]]:
    """(labels, values) for every device of one node at `now`."""
    rows = []
    boot = _boot_time(node, now)
    counted: set[int] = set()  # XIDs are per physical GPU: count them on its first row
    for device in node_devices(node):
        pod = holders.get(device.key)
        utilisation = kubelet.gpu_utilisation(pod, now, device.key) if pod else 0.0
        idle_watts = _model(device.model_name)["power"][0] * _mig_share(device)
        energy = meter.read(
            device.key,
            now.timestamp(),
            device_power(device, utilisation, now),
            idle_watts,
            boot,
        )
        values = device_values(device, pod, now, _xid(node, pod, device.gpu), energy, utilisation)
        if device.gpu not in counted:
            counted.add(device.gpu)
            values[XID_COUNT.name] = xid.recent_counts(node, device.gpu, now)
        rows.append((device_labels(device, pod, pod_labels), values))
    return rows


def render_rows(rows: list[tuple[list, dict]]) -> str:
    grouped = {
        field.family.name: [
            (labels, format_value(field, values[field.family.name])) for labels, values in rows
        ]
        for field in FIELDS
    }
    # The exporter adds the last XID's code and text as labels of its own series.
    grouped["DCGM_FI_DEV_XID_ERRORS"] = [
        (labels + _xid_labels(int(value)), value)
        for labels, value in grouped["DCGM_FI_DEV_XID_ERRORS"]
    ]
    grouped[XID_COUNT.name] = [
        (labels + [("window_size_in_ms", str(xid.COUNT_WINDOW_MS)), ("xid", str(code))], str(n))
        for labels, values in rows
        for code, n in sorted(values.get(XID_COUNT.name, {}).items())
    ]
    return exposition.render(FAMILIES, grouped)


def _xid_labels(code: int) -> list[tuple]:
    return [("err_code", str(code)), ("err_msg", xid.message(code))]


def render(
    nodes: list[dict],
    pods: list[dict],
    now: datetime,
    pod_labels=POD_LABELS,
    meter: EnergyMeter | None = None,
) -> str:
    """The exporter pages of all GPU nodes in one (what GET /metrics serves)."""
    holders = _holders(pods)
    meter = meter or EnergyMeter()
    rows = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        rows += node_rows(node, holders, now, meter, pod_labels)
    return render_rows(rows)


def render_node(
    node: dict, pods: list[dict], now: datetime, meter: EnergyMeter | None = None
) -> str:
    """The page the exporter pod on `node` serves."""
    on_node = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]]
    return render_rows(node_rows(node, _holders(on_node), now, meter or EnergyMeter()))


def is_exporter_node(node: dict) -> bool:
    """The DaemonSet runs where there are GPUs (the GPU Operator selects nodes by
    `nvidia.com/gpu.deploy.dcgm-exporter=true`, which GPU nodes carry)."""
    return bool(node_devices(node))


def _pod_suffix(node_name: str) -> str:
    """The DaemonSet pod's random suffix, stable per node."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(node_name.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def file_sd_targets(nodes: list[dict], address: str) -> list[dict]:
    """Prometheus file_sd / http_sd target groups: one per GPU node, all served by
    kubesim at `address` (host:port) under /metrics/dcgm/{node}."""
    groups = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        if not is_exporter_node(node):
            continue
        name = node["metadata"]["name"]
        internal_ip = next(
            (
                a["address"]
                for a in (node.get("status") or {}).get("addresses") or []
                if a.get("type") == "InternalIP"
            ),
            name,
        )
        groups.append(
            {
                "targets": [address],
                # The labels a Kubernetes service discovery gives the exporter pod. They
                # clash with the exporter's own namespace/pod/container labels, so
                # without honor_labels those arrive as exported_namespace etc., as on
                # a real cluster.
                "labels": {
                    "__metrics_path__": f"/metrics/dcgm/{name}",
                    "instance": f"{internal_ip}:{EXPORTER_PORT}",
                    "node": name,
                    "namespace": EXPORTER_NAMESPACE,
                    "pod": f"nvidia-dcgm-exporter-{_pod_suffix(name)}",
                    "container": "nvidia-dcgm-exporter",
                },
            }
        )
    return groups
