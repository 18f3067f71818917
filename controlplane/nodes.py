"""kubesim's cluster files as KWOK nodes: the same names, GPU Feature Discovery
labels, taints, capacity and allocatable, spot labels, so the two backends hold
the same cluster. KWOK manages the nodes labelled `kwok.x-k8s.io/node: fake`
(its lease keeps them Ready; take the label away and the heartbeats stop: KWOK
watches nodes by that label, so the node leaves its view).

A node's InternalIP is loopback, where KWOK serves the kubelet's API (pod
logs): nothing the API server does may reach a private address here."""

from datetime import datetime
from pathlib import Path

from kubesim import cluster
from kubesim.cluster import DEFAULT_CLUSTER

KWOK_LABEL = "kwok.x-k8s.io/node"
KWOK_MANAGED = "fake"  # the value KWOK's label selector looks for
CONTAINER_LOG = "kwok: this container is simulated; no process runs and nothing is logged."


def container_log(now: datetime) -> str:
    """The log every simulated container shows, in the CRI log format the kubelet reads."""
    return f"{now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} stdout F {CONTAINER_LOG}\n"


def kwok_nodes(path=None, *, kubelet_port: int, ip="127.0.0.1") -> list[dict]:
    return kwok_nodes_of(
        cluster.load(Path(path or DEFAULT_CLUSTER)), kubelet_port=kubelet_port, ip=ip
    )


def kwok_nodes_of(data: dict, *, kubelet_port: int, ip="127.0.0.1") -> list[dict]:
    nodes = []
    for node in cluster.build_nodes(data):
        node["metadata"]["labels"][KWOK_LABEL] = KWOK_MANAGED
        node["spec"]["providerID"] = f"kwok://{node['metadata']['name']}"
        status = node["status"]
        del status["conditions"]  # KWOK's node-initialize stage reports them, fresh
        status["addresses"] = [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": node["metadata"]["name"]},
        ]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
        nodes.append(node)
    return nodes


def is_ready(node: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def cluster_logs(path: Path) -> str:
    """KWOK's ClusterLogs: every container's log is `path` (what `kubectl logs` reads)."""
    return f"""---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: simulated-containers
spec:
  selector: {{}}
  logs:
  - containers: []
    logsFile: {path}
    follow: false
"""


# --- a DRA pool: GPUs published in ResourceSlices, not as an extended resource ---

DRA_DRIVER = "gpu.nvidia.com"
DRA_CLASSES = {  # NVIDIA's DeviceClasses (k8s-dra-driver-gpu)
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'mig'",
}


def dra_pools(path=None) -> list[dict]:
    """The cluster file's `draPools` (kubesim's nodePools format; kubesim serves no
    DRA and ignores them): the real control plane builds them with `--dra`."""
    return cluster.load(Path(path or DEFAULT_CLUSTER)).get("draPools") or []


def dra_nodes(path=None, *, kubelet_port: int, ip="127.0.0.1") -> list[dict]:
    """KWOK nodes of the DRA pools: GPU labels and taint, but no `nvidia.com/gpu` in
    capacity or allocatable (a DRA node must not offer its GPUs twice)."""
    pools = dra_pools(path)
    made = kwok_nodes_of({"nodePools": pools}, kubelet_port=kubelet_port, ip=ip) if pools else []
    for node in made:
        for figures in (node["status"]["capacity"], node["status"]["allocatable"]):
            for name in [n for n in figures if n.startswith("nvidia.com/")]:
                del figures[name]
    return made


def dra_objects(path=None) -> list[dict]:
    """NVIDIA's DeviceClasses and one ResourceSlice per DRA node, its GPUs published
    as the driver does (type, productName, architecture, uuid; memory in bytes)."""
    objects = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
        for name, expression in DRA_CLASSES.items()
    ]
    for pool in dra_pools(path):
        model = cluster.GPU_MODELS[pool["gpu"]["model"]]
        for index in range(int(pool.get("count", 1))):
            node = cluster.node_name(pool, index)
            devices = [
                {
                    "name": f"gpu-{gpu}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "productName": {"string": model["model_name"]},
                        "brand": {"string": "Nvidia"},
                        "architecture": {"string": model["family"].capitalize()},
                        "uuid": {"string": cluster.gpu_uuid(node, gpu)},
                    },
                    "capacity": {"memory": {"value": f"{model['memory']}Mi"}},
                }
                for gpu in range(int(pool["gpu"].get("count", 1)))
            ]
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-{DRA_DRIVER}"},
                    "spec": {
                        "driver": DRA_DRIVER,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices,
                    },
                }
            )
    return objects
