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

import dataclasses
import functools
import hashlib
import threading
from dataclasses import dataclass
from datetime import datetime

from kubesim import exposition
from kubesim.clock import parse_time
from kubesim.cluster import GPU_MODELS, Device, node_devices
from kubesim.controllers import xid
from kubesim.controllers.scheduler import held_device_keys
from kubesim.exposition import Family
from kubesim.kubelet import runtime

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
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"

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


@functools.lru_cache(maxsize=256)
def _power(model_name: str, mig_profile: str | None) -> tuple[float, float]:
    """(idle W, max W) of a device; a MIG instance draws its share of the GPU."""
    idle_watts, max_watts = next(
        (m["power"] for m in GPU_MODELS.values() if m["model_name"] == model_name), (30.0, 300.0)
    )
    share = int(mig_profile.split("g.", 1)[0]) / 7 if mig_profile else 1.0
    return idle_watts * share, max_watts * share


def sample(
    device: Device,
    loads: list[tuple[runtime.GpuLoad, float]],
    at: float,
    xid: int,
    meter: EnergyMeter,
    boot: float,
) -> dict:
    """The metric values (numbers, not yet formatted) of one device at epoch second
    `at`, held by pods with these (load, start time); [] when nobody holds it.

    The one place DCGM values are made: the live pages and the history generator
    both call it."""
    utilisation, used = 0.0, 0
    for load, started in loads:
        busy = load.utilisation(at, started, device.key)
        utilisation += busy
        used += load.framebuffer_used(device.memory_mib, busy)
    utilisation, used = min(utilisation, 1.0), min(used, device.memory_mib)
    idle_watts, max_watts = _power(device.model_name, device.mig_profile)
    power = idle_watts + (max_watts - idle_watts) * utilisation
    power = max(power + runtime.noise(device.key + "/power", at, max_watts / 350), 0.0)
    energy = meter.read(device.key, at, power, idle_watts, boot)
    temperature = 31 + 45 * utilisation + runtime.noise(device.key + "/temp", at, 1.5)
    idle_clock, max_clock = SM_CLOCKS.get(device.model_name, (210, 1410))
    return {
        "DCGM_FI_DEV_SM_CLOCK": max_clock if utilisation > 0.01 else idle_clock,
        "DCGM_FI_DEV_GPU_TEMP": round(temperature),
        "DCGM_FI_DEV_POWER_USAGE": round(power, 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy,
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


def boot_time(node: dict, default: float) -> float:
    """When the node booted: its creation, for the energy counter."""
    created = node["metadata"].get("creationTimestamp")
    return parse_time(created).timestamp() if created else default


def pod_load(pod: dict, at: float) -> tuple[runtime.GpuLoad, float]:
    status = pod.get("status") or {}
    started = parse_time(status["startTime"]).timestamp() if status.get("startTime") else at
    return runtime.GpuLoad.from_annotations(pod), started


def physical_devices(devices: list[Device]) -> list[tuple[Device, list[str]]]:
    """(the device as DCGM sees it, the schedulable device keys on it): one entry per
    GPU or MIG instance; a time-sliced GPU's replicas fold into one."""
    groups: dict[str, tuple[Device, list[str]]] = {}
    for device in devices:
        group = groups.get(device.physical_key)
        if group is None:
            seen = (
                dataclasses.replace(device, replica=None) if device.replica is not None else device
            )
            groups[device.physical_key] = (seen, [device.key])
        else:
            group[1].append(device.key)
    return list(groups.values())


def holders_of(keys: list[str], holders: dict) -> list:
    """The distinct holders of these device keys, in key order."""
    found = []
    for key in keys:
        holder = holders.get(key)
        if holder is not None and not any(holder is other for other in found):
            found.append(holder)
    return found


def node_rows(
    node: dict,
    holders: dict[str, dict],
    now: datetime,
    meter: EnergyMeter,
    pod_labels=POD_LABELS,
    devices: list[Device] | None = None,
) -> list[tuple[list, dict]]:
    """(labels, values) for every device of one node at `now` (its extended-resource
    devices, or `devices`). A GPU that pods share
    by time-slicing has one set of values, copied to a row per pod, as the exporter
    does (so summing across pods counts the GPU several times)."""
    rows = []
    at = now.timestamp()
    boot = boot_time(node, at)
    counted: set[int] = set()  # XIDs are per physical GPU: count them on its first device
    devices = node_devices(node) if devices is None else devices
    for device, keys in physical_devices(devices):
        pods = holders_of(keys, holders)
        loads = [pod_load(pod, at) for pod in pods]
        code = _xid(node, pods[0] if pods else None, device.gpu)
        values = sample(device, loads, at, code, meter, boot)
        if device.gpu not in counted:
            counted.add(device.gpu)
            values[XID_COUNT.name] = xid.recent_counts(node, device.gpu, now)
        for pod in pods or [None]:
            rows.append((device_labels(device, pod, pod_labels), values))
    return rows


def render_rows(rows: list[tuple[list, dict]]) -> str:
    grouped = {
        field.family.name: [
            (labels, format_value(field, values[field.family.name])) for labels, values in rows
        ]
        for field in FIELDS
    }
    grouped[XID_ERRORS] = [
        (family_labels(XID_ERRORS, labels, int(value)), value)
        for labels, value in grouped[XID_ERRORS]
    ]
    grouped[XID_COUNT.name] = [
        (labels + [("window_size_in_ms", str(xid.COUNT_WINDOW_MS)), ("xid", str(code))], str(n))
        for labels, values in rows
        for code, n in sorted(values.get(XID_COUNT.name, {}).items())
    ]
    return exposition.render(FAMILIES, grouped)


def family_labels(family: str, labels: list, value) -> list[tuple]:
    """A sample's labels in one family: the exporter adds the last XID's code and text
    to DCGM_FI_DEV_XID_ERRORS."""
    if family == XID_ERRORS:
        return labels + [("err_code", str(value)), ("err_msg", xid.message(value))]
    return labels


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
    node: dict,
    pods: list[dict],
    now: datetime,
    meter: EnergyMeter | None = None,
    devices: list[Device] | None = None,
) -> str:
    """The page the exporter pod on `node` serves (its devices, or `devices`)."""
    on_node = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]]
    rows = node_rows(node, _holders(on_node), now, meter or EnergyMeter(), devices=devices)
    return render_rows(rows)


def is_exporter_node(node: dict) -> bool:
    """The DaemonSet runs where there are GPUs (the GPU Operator selects nodes by
    `nvidia.com/gpu.deploy.dcgm-exporter=true`, which GPU nodes carry)."""
    return bool(node_devices(node))


def _pod_suffix(node_name: str) -> str:
    """The DaemonSet pod's random suffix, stable per node."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(node_name.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def target_labels(nodes: list[dict], address: str, job: str = "dcgm") -> dict[str, dict]:
    """node -> the labels Prometheus gives its DCGM target (as from file_sd_targets)."""
    return {
        group["labels"]["node"]: {
            "job": job,
            **{k: v for k, v in group["labels"].items() if not k.startswith("__")},
        }
        for group in file_sd_targets(nodes, address)
    }


def file_sd_targets(nodes: list[dict], address: str, also=frozenset()) -> list[dict]:
    """Prometheus file_sd / http_sd target groups: one per GPU node (and per node
    named in `also`: those with DRA devices), all served by
    kubesim at `address` (host:port) under /metrics/dcgm/{node}."""
    groups = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        if not is_exporter_node(node) and node["metadata"]["name"] not in also:
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
