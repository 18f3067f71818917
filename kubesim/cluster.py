"""Cluster file (YAML) -> Node objects, and the GPU devices each node holds.

Nodes are built by pure functions from the parsed file so tests can compare output
without a server. GPU devices are derived from the Node object itself (labels and
capacity), so a node created over the API gets devices too.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_CLUSTER = str(Path(__file__).parent / "clusters" / "demo.yaml")
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_SUFFIX = "-SHARED"  # GFD's product suffix on time-sliced GPUs
MIG_PREFIX = "nvidia.com/mig-"
DEFAULT_KUBELET_VERSION = "v1.31.4"

# model key -> what GPU Feature Discovery and DCGM report for it. memory is MiB as
# GFD's nvidia.com/gpu.memory label shows it; power is (idle W, max W).
GPU_MODELS = {
    "H100-80GB-HBM3": {
        "product": "NVIDIA-H100-80GB-HBM3",
        "model_name": "NVIDIA H100 80GB HBM3",
        "memory": 81559,
        "family": "hopper",
        "compute": ("9", "0"),
        "power": (70.0, 700.0),
    },
    "A100-SXM4-80GB": {
        "product": "NVIDIA-A100-SXM4-80GB",
        "model_name": "NVIDIA A100-SXM4-80GB",
        "memory": 81920,
        "family": "ampere",
        "compute": ("8", "0"),
        "power": (60.0, 400.0),
    },
    "A100-SXM4-40GB": {
        "product": "NVIDIA-A100-SXM4-40GB",
        "model_name": "NVIDIA A100-SXM4-40GB",
        "memory": 40960,
        "family": "ampere",
        "compute": ("8", "0"),
        "power": (55.0, 400.0),
    },
    "L4": {
        "product": "NVIDIA-L4",
        "model_name": "NVIDIA L4",
        "memory": 23034,
        "family": "ada-lovelace",
        "compute": ("8", "9"),
        "power": (16.0, 72.0),
    },
    "T4": {
        "product": "Tesla-T4",
        "model_name": "Tesla T4",
        "memory": 15360,
        "family": "turing",
        "compute": ("7", "5"),
        "power": (10.0, 70.0),
    },
}

# MIG profile -> framebuffer MiB of one instance (A100/H100 80GB and A100 40GB profiles).
MIG_PROFILE_MEMORY = {
    "1g.5gb": 4864,
    "2g.10gb": 9984,
    "3g.20gb": 19968,
    "4g.20gb": 19968,
    "7g.40gb": 40192,
    "1g.10gb": 9856,
    "1g.20gb": 19968,
    "2g.20gb": 19968,
    "3g.40gb": 40192,
    "4g.40gb": 40192,
    "7g.80gb": 80384,
}

# The GPU Operator's standard mig-parted configs, per GPU (80GB parts).
MIG_CONFIGS = {
    "all-1g.10gb": {"1g.10gb": 7},
    "all-2g.20gb": {"2g.20gb": 3},
    "all-3g.40gb": {"3g.40gb": 2},
    "all-4g.40gb": {"4g.40gb": 1},
    "all-7g.80gb": {"7g.80gb": 1},
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "all-1g.5gb": {"1g.5gb": 7},
    "all-3g.20gb": {"3g.20gb": 2},
}

# Typical PCI bus numbers of an 8-GPU HGX board, so pci_bus_id labels look real.
_PCI_BUSES = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD]


class ClusterFileError(ValueError):
    pass


@dataclass(frozen=True)
class Device:
    """One schedulable GPU device: a whole GPU or one MIG instance."""

    node: str
    gpu: int  # index of the physical GPU on the node
    uuid: str  # UUID of the physical GPU (MIG instances report their parent's)
    pci_bus_id: str
    model_name: str
    resource: str  # extended resource the device is advertised as
    memory_mib: int
    mig_profile: str | None = None
    gpu_instance_id: int | None = None
    replica: int | None = None  # time-slicing: which of the GPU's replicas

    @functools.cached_property
    def physical_key(self) -> str:
        """The GPU (or MIG instance) itself: shared by all replicas of a time-sliced GPU."""
        if self.mig_profile:
            return f"{self.node}/{self.gpu}/{self.gpu_instance_id}"
        return f"{self.node}/{self.gpu}"

    @functools.cached_property
    def key(self) -> str:
        """Stable id of the schedulable device across the cluster (made once: metrics read
        it often). Replicas are `node/gpu::replica`, like the device plugin's IDs."""
        if self.replica is not None:
            return f"{self.physical_key}::{self.replica}"
        return self.physical_key


def load(path: str | Path) -> dict:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    validate(data)
    return data


def validate(data: dict) -> None:
    pools = data.get("nodePools")
    if not isinstance(pools, list) or not pools:
        raise ClusterFileError("cluster file needs a non-empty nodePools list")
    seen = set()
    for pool in pools:
        name = pool.get("name")
        if not name or name in seen:
            raise ClusterFileError(f"node pool needs a unique name, got {name!r}")
        seen.add(name)
        _validate_reclaims(pool)
        gpu = pool.get("gpu")
        if gpu:
            if gpu.get("model") not in GPU_MODELS:
                raise ClusterFileError(
                    f"pool {name}: unknown gpu.model {gpu.get('model')!r}; "
                    f"known: {', '.join(sorted(GPU_MODELS))}"
                )
            mig = gpu.get("mig")
            if mig and not (mig.get("profiles") or mig.get("config") in MIG_CONFIGS):
                raise ClusterFileError(
                    f"pool {name}: mig needs profiles or a known config "
                    f"({', '.join(sorted(MIG_CONFIGS))})"
                )


def _validate_reclaims(pool: dict) -> None:
    """Random spot reclaims: reclaimRatePerHour (and seed, reclaimMode,
    reclaimGraceSeconds, replacementAfterSeconds) on a pool."""
    name = pool["name"]
    for key in ("reclaimRatePerHour", "reclaimGraceSeconds", "replacementAfterSeconds"):
        value = pool.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ClusterFileError(f"pool {name}: {key} must be a number >= 0, got {value!r}")
    if pool.get("reclaimMode", "eviction") not in ("eviction", "shutdown"):
        raise ClusterFileError(f"pool {name}: reclaimMode must be eviction or shutdown")
    if pool.get("reclaimRatePerHour") and not pool.get("spot"):
        raise ClusterFileError(f"pool {name}: reclaimRatePerHour needs spot: true")


def mig_profiles_per_gpu(mig: dict) -> dict[str, int]:
    return dict(mig.get("profiles") or MIG_CONFIGS[mig["config"]])


def gpu_labels(gpu: dict) -> dict[str, str]:
    """The labels GPU Feature Discovery puts on a node with these GPUs."""
    model = GPU_MODELS[gpu["model"]]
    count = int(gpu.get("count", 1))
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": model["product"],
        "nvidia.com/gpu.memory": str(model["memory"]),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": model["family"],
        "nvidia.com/gpu.compute.major": model["compute"][0],
        "nvidia.com/gpu.compute.minor": model["compute"][1],
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/mig.capable": "true" if model["family"] in ("ampere", "hopper") else "false",
    }
    mig = gpu.get("mig")
    if mig:
        labels["nvidia.com/mig.strategy"] = mig.get("strategy", "mixed")
        labels["nvidia.com/mig.config"] = mig.get("config", "custom")
        labels["nvidia.com/mig.config.state"] = "success"
        for profile, per_gpu in mig_profiles_per_gpu(mig).items():
            labels[f"nvidia.com/mig-{profile}.count"] = str(per_gpu * count)
            labels[f"nvidia.com/mig-{profile}.memory"] = str(MIG_PROFILE_MEMORY.get(profile, 0))
    else:
        labels["nvidia.com/mig.strategy"] = "none"
    replicas = int(gpu.get("replicas") or 1)
    if replicas > 1:
        # Time-slicing, as GPU Feature Discovery labels it: the product gets -SHARED.
        labels["nvidia.com/gpu.product"] += SHARED_SUFFIX
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    return labels


def gpu_capacity(gpu: dict) -> dict[str, str]:
    count = int(gpu.get("count", 1))
    mig = gpu.get("mig")
    if not mig:
        return {GPU_RESOURCE: str(count * int(gpu.get("replicas", 1)))}
    return {
        f"{MIG_PREFIX}{profile}": str(per_gpu * count)
        for profile, per_gpu in mig_profiles_per_gpu(mig).items()
    }


def node_name(pool: dict, index: int) -> str:
    return f"{pool.get('namePrefix', pool['name'])}-{index}"


def build_node(pool: dict, index: int, *, kubelet_version: str, zone: str) -> dict:
    """A complete v1 Node for the index-th node of a pool (pure)."""
    name = node_name(pool, index)
    digest = hashlib.sha256(name.encode()).hexdigest()
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool.get("instanceType", "sim.standard"),
        "topology.kubernetes.io/zone": zone,
        "kubesim.io/pool": pool["name"],
    }
    taints = list(pool.get("taints") or [])
    capacity = {
        "cpu": str(pool.get("cpu", "32")),
        "memory": str(pool.get("memory", "128Gi")),
        "pods": str(pool.get("pods", 110)),
        "ephemeral-storage": str(pool.get("ephemeralStorage", "500Gi")),
    }
    gpu = pool.get("gpu")
    if gpu:
        labels.update(gpu_labels(gpu))
        capacity.update(gpu_capacity(gpu))
        if "taints" not in pool:
            # GPU pools are tainted with the resource name so only GPU pods land there.
            taints = [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]
    if pool.get("spot"):
        labels["karpenter.sh/capacity-type"] = "spot"
    labels.update(pool.get("labels") or {})
    ip = f"10.0.{int(digest[:2], 16)}.{int(digest[2:4], 16) % 250 + 2}"
    condition_time = "2025-01-01T00:00:00Z"
    conditions = [
        _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", condition_time),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", condition_time),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID", condition_time),
        _condition("Ready", "True", "KubeletReady", condition_time),
    ]
    spec = {"podCIDR": f"10.244.{index}.0/24", "providerID": f"kubesim://{name}"}
    if taints:
        spec["taints"] = taints
    if pool.get("unschedulable"):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {}},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": digest[:32],
                "systemUUID": str(uuid.UUID(digest[:32])),
                "bootID": str(uuid.UUID(digest[32:64])),
                "kernelVersion": "6.8.0-1015-aws",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _condition(kind: str, status: str, reason: str, at: str) -> dict:
    messages = {
        "KubeletReady": "kubelet is posting ready status",
        "KubeletHasSufficientMemory": "kubelet has sufficient memory available",
        "KubeletHasNoDiskPressure": "kubelet has no disk pressure",
        "KubeletHasSufficientPID": "kubelet has sufficient PID available",
    }
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": messages[reason],
        "lastHeartbeatTime": at,
        "lastTransitionTime": at,
    }


def build_nodes(data: dict) -> list[dict]:
    """All nodes of a parsed cluster file, in file order."""
    version = data.get("kubeletVersion", DEFAULT_KUBELET_VERSION)
    zones = data.get("zones") or ["sim-a", "sim-b"]
    nodes = []
    for pool in data["nodePools"]:
        for index in range(int(pool.get("count", 1))):
            zone = pool.get("zone") or zones[index % len(zones)]
            nodes.append(build_node(pool, index, kubelet_version=version, zone=zone))
    return nodes


def gpu_uuid(node: str, gpu: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'kubesim/{node}/{gpu}')}"


def model_for_product(product: str) -> dict | None:
    product = product.removesuffix(SHARED_SUFFIX)
    for model in GPU_MODELS.values():
        if model["product"] == product:
            return model
    return None


def node_devices(node: dict) -> list[Device]:
    """GPU devices of a Node, derived from its GFD labels and capacity (pure)."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    model = model_for_product(labels.get("nvidia.com/gpu.product", "")) or {
        "model_name": labels.get("nvidia.com/gpu.product", "NVIDIA GPU"),
        "memory": int(labels.get("nvidia.com/gpu.memory", "16384")),
    }
    gpu_count = int(labels.get("nvidia.com/gpu.count", capacity.get(GPU_RESOURCE, "0")) or 0)
    mig_counts = {
        key[len(MIG_PREFIX) :]: int(value)
        for key, value in sorted(capacity.items())
        if key.startswith(MIG_PREFIX) and int(value) > 0
    }

    def physical(gpu: int) -> dict:
        bus = _PCI_BUSES[gpu % len(_PCI_BUSES)] + 0x100 * (gpu // len(_PCI_BUSES))
        return {
            "node": name,
            "gpu": gpu,
            "uuid": gpu_uuid(name, gpu),
            "pci_bus_id": f"00000000:{bus:02X}:00.0",
            "model_name": model["model_name"],
        }

    if not mig_counts:
        whole = int(capacity.get(GPU_RESOURCE, "0") or 0)
        replicas = int(labels.get("nvidia.com/gpu.replicas", "1") or 1)
        if replicas <= 1:
            return [
                Device(**physical(i), resource=GPU_RESOURCE, memory_mib=model["memory"])
                for i in range(whole)
            ]
        # Time-slicing: each GPU is advertised `replicas` times; every replica sees the
        # whole GPU (no memory or fault isolation).
        return [
            Device(**physical(i // replicas), resource=GPU_RESOURCE, memory_mib=model["memory"],
                   replica=i % replicas)
            for i in range(whole)
        ]  # fmt: skip
    # MIG instances are spread evenly over the physical GPUs, profile by profile;
    # GPU instance ids count up per GPU as nvidia-smi shows them.
    gpus = max(gpu_count, 1)
    devices = []
    next_instance = [1] * gpus
    for profile, total in mig_counts.items():
        per_gpu = -(-total // gpus)
        for n in range(total):
            gpu = min(n // per_gpu, gpus - 1)
            devices.append(
                Device(
                    **physical(gpu),
                    resource=f"{MIG_PREFIX}{profile}",
                    memory_mib=MIG_PROFILE_MEMORY.get(profile, 0),
                    mig_profile=profile,
                    gpu_instance_id=next_instance[gpu],
                )
            )
            next_instance[gpu] += 1
    return devices
