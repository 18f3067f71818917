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
from kubesim.app import DEFAULT_CLUSTER

KWOK_LABEL = "kwok.x-k8s.io/node"
KWOK_MANAGED = "fake"  # the value KWOK's label selector looks for
CONTAINER_LOG = "kwok: this container is simulated; no process runs and nothing is logged."


def container_log(now: datetime) -> str:
    """The log every simulated container shows, in the CRI log format the kubelet reads."""
    return f"{now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} stdout F {CONTAINER_LOG}\n"


def kwok_nodes(path=None, *, kubelet_port: int, ip="127.0.0.1") -> list[dict]:
    nodes = []
    for node in cluster.build_nodes(cluster.load(Path(path or DEFAULT_CLUSTER))):
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
