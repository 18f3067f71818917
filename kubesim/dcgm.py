"""DCGM exporter text for every simulated GPU and MIG instance (pure).

The output follows dcgm-exporter: `# HELP` / `# TYPE` per metric, one sample per
device with the labels gpu, UUID, pci_bus_id, device, modelName, Hostname (MIG adds
GPU_I_PROFILE and GPU_I_ID) and, for a device a pod holds, namespace/pod/container.
"""

from __future__ import annotations

from datetime import datetime

from kubesim import kubelet
from kubesim.cluster import GPU_MODELS, Device, node_devices
from kubesim.scheduler import held_device_keys

DRIVER_VERSION = "550.90.07"
XID_ANNOTATION = "kubesim.io/xid"

# name -> (type, help) as in dcgm-exporter's default counters file.
METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
}
POD_LABELS = ("namespace", "pod", "container")


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


def _power_range(model_name: str) -> tuple[float, float]:
    for model in GPU_MODELS.values():
        if model["model_name"] == model_name:
            return model["power"]
    return (30.0, 300.0)


def device_values(device: Device, pod: dict | None, now: datetime, xid: int) -> dict:
    """The metric values of one device at `now`."""
    utilisation = kubelet.gpu_utilisation(pod, now, device.key) if pod else 0.0
    if pod:
        # A held GPU has the framework and model loaded even when idle.
        fraction = 0.08 + 0.8 * utilisation
        used = int(device.memory_mib * min(fraction, 0.98))
    else:
        used = 0
    idle_watts, max_watts = _power_range(device.model_name)
    share = 1.0
    if device.mig_profile:
        share = int(device.mig_profile.split("g.", 1)[0]) / 7
    power = (idle_watts + (max_watts - idle_watts) * utilisation) * share
    power += kubelet.noise(device.key + "/power", now, 2.0 * share)
    temperature = 31 + 45 * utilisation + kubelet.noise(device.key + "/temp", now, 1.5)
    return {
        # DCGM reports 0 GPU_UTIL on MIG instances; only the profiling metric works there.
        "DCGM_FI_DEV_GPU_UTIL": 0 if device.mig_profile else round(utilisation * 100),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(utilisation, 6),
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": device.memory_mib - used,
        "DCGM_FI_DEV_GPU_TEMP": round(temperature),
        "DCGM_FI_DEV_POWER_USAGE": round(max(power, 0.0), 3),
        "DCGM_FI_DEV_XID_ERRORS": xid,
    }


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


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


def _xid(node: dict, pod: dict | None) -> int:
    for obj in (pod, node):
        value = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(XID_ANNOTATION)
        if value:
            try:
                return int(value)
            except ValueError:
                pass
    return 0


def render(nodes: list[dict], pods: list[dict], now: datetime, pod_labels=POD_LABELS) -> str:
    """The exporter page for all GPU devices of `nodes`, given all pods."""
    holders = _holders(pods)
    rows = []  # (labels, values) per device
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        for device in node_devices(node):
            pod = holders.get(device.key)
            values = device_values(device, pod, now, _xid(node, pod))
            rows.append((device_labels(device, pod, pod_labels), values))
    lines = []
    for metric, (kind, help_text) in METRICS.items():
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} {kind}")
        for labels, values in rows:
            rendered = ",".join(f'{name}="{_escape(value)}"' for name, value in labels)
            lines.append(f"{metric}{{{rendered}}} {values[metric]}")
    return "\n".join(lines) + "\n"
