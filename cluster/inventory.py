"""The cluster's GPU inventory, from plain Node and Pod dicts (no API calls, no database).

The one rule "this node serves this flavor" lives here (`node_serves_flavor`):
the inventory counts capacity with it, batch placement and billing's mapping of
a GPU to a flavor reuse it. Everything here is a pure function, tested by
comparing its output.
"""

import re
from dataclasses import dataclass, field

# Node labels naming the node's pool, by the tool that made the pool.
POOL_LABELS = (
    "kubesim.io/pool",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "eks.amazonaws.com/nodegroup",
)
# Set by NVIDIA GPU feature discovery.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# Spot (preemptible) capacity, by the tool that made the node.
SPOT_LABELS = {
    "karpenter.sh/capacity-type": "spot",
    "cloud.google.com/gke-spot": "true",
    "kubernetes.azure.com/scalesetpriority": "spot",
}


def is_gpu_resource(name):
    """Extended resources the device plugins (and DRA device classes) publish for GPUs."""
    return name.startswith("nvidia.com/") or ".deviceclass." in name


def count(quantity):
    """Whole devices from a quantity string; what is not a whole number counts as 0."""
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def labels_of(node):
    return (node.get("metadata") or {}).get("labels") or {}


def allocatable_gpus(node):
    """{resource name: devices} the node offers, GPU resources only."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {name: count(value) for name, value in allocatable.items() if is_gpu_resource(name)}


def node_serves_flavor(node, flavor):
    """THE rule: `node` (a Node dict) serves `flavor` (anything with `resource_name`
    and `node_selector`, e.g. a Flavor) when it offers the flavor's resource name
    and its labels carry every key=value of the flavor's node selector.

    Flavors sharing a resource name are told apart only by their selectors.
    Readiness, cordons and taints are not part of it: a cordoned node still
    serves its flavor, it just offers no capacity now.
    """
    if flavor.resource_name not in allocatable_gpus(node):
        return False
    labels = labels_of(node)
    return all(labels.get(key) == value for key, value in (flavor.node_selector or {}).items())


def node_flavors(node, flavors):
    """The flavors of `flavors` that `node` serves, in the order given."""
    return [flavor for flavor in flavors if node_serves_flavor(node, flavor)]


def is_spot(node):
    """True if the node is spot (preemptible) capacity, by any cloud's label."""
    labels = labels_of(node)
    return any(labels.get(key) == value for key, value in SPOT_LABELS.items())


def is_ready(node):
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def pod_requests(pod):
    """{resource name: whole units} a pod's containers ask for (requests over limits)."""
    totals = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in asked.items():
            totals[name] = totals.get(name, 0) + count(quantity)
    return totals


def held_by_node(pods):
    """{node name: {resource name: units}} held by pods bound there and not finished."""
    held = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        bucket = held.setdefault(node_name, {})
        for name, units in pod_requests(pod).items():
            bucket[name] = bucket.get(name, 0) + units
    return held


@dataclass
class GpuNodeFigures:
    """One GPU node as the inventory sees it (the fields of cluster.models.GpuNode)."""

    name: str
    pool: str = ""
    gpu_model: str = ""
    allocatable: dict = field(default_factory=dict)
    allocated: dict = field(default_factory=dict)
    taints: list = field(default_factory=list)
    cordoned: bool = False
    ready: bool = True


@dataclass
class FlavorFigures:
    devices: int = 0  # offered by schedulable, Ready nodes that serve the flavor
    allocated: int = 0  # held by pods on every node that serves it


def gpu_node_figures(node, held):
    """The node's figures, or None if it offers no GPU."""
    allocatable = allocatable_gpus(node)
    if not any(allocatable.values()):
        return None
    labels = labels_of(node)
    name = node["metadata"]["name"]
    spec = node.get("spec") or {}
    return GpuNodeFigures(
        name=name,
        pool=next((labels[key] for key in POOL_LABELS if labels.get(key)), ""),
        gpu_model=labels.get(GPU_PRODUCT_LABEL, ""),
        allocatable=allocatable,
        allocated={k: v for k, v in held.get(name, {}).items() if k in allocatable},
        taints=spec.get("taints") or [],
        cordoned=bool(spec.get("unschedulable")),
        ready=is_ready(node),
    )


@dataclass
class Inventory:
    nodes: list  # [GpuNodeFigures], GPU nodes only, in the order listed
    flavors: dict  # {flavor slug: FlavorFigures}, every flavor given


def take_inventory(nodes, pods, flavors):
    """GPU nodes and per-flavor figures from Node and Pod dicts.

    `flavors`: anything with `slug`, `resource_name` and `node_selector`.
    """
    held = held_by_node(pods)
    gpu_nodes = []
    per_flavor = {flavor.slug: FlavorFigures() for flavor in flavors}
    for node in nodes:
        figures = gpu_node_figures(node, held)
        if figures is None:
            continue
        gpu_nodes.append(figures)
        offers = figures.ready and not figures.cordoned
        for flavor in node_flavors(node, flavors):
            totals = per_flavor[flavor.slug]
            totals.allocated += figures.allocated.get(flavor.resource_name, 0)
            if offers:
                totals.devices += figures.allocatable[flavor.resource_name]
    return Inventory(nodes=gpu_nodes, flavors=per_flavor)


# --- team namespaces' quota, as the cluster keeps it ---

QUOTA_PREFIX = "requests."
_REFUSED = re.compile(r"exceeded quota: [^,]+, requested: (\S+?), used:")


@dataclass
class QuotaFigures:
    """One GPU resource of a namespace's quota: the cap, what pods use of it now,
    and the last pod creation the quota refused (a FailedCreate event)."""

    hard: int = 0
    used: int = 0
    refused_at: str = ""  # the event's lastTimestamp, as the API gives it
    refused_message: str = ""

    @property
    def at_limit(self):
        return self.used >= self.hard


def refused_resources(message):
    """The resource names a quota refusal names ("exceeded quota: q, requested:
    requests.nvidia.com/gpu=1, used: ..."), or [] for any other message."""
    match = _REFUSED.search(message or "")
    if not match:
        return []
    keys = (part.split("=", 1)[0] for part in match.group(1).split(","))
    return [key.removeprefix(QUOTA_PREFIX) for key in keys if key.startswith(QUOTA_PREFIX)]


def quota_usage(quotas, events, namespaces):
    """{namespace: {resource name: QuotaFigures}} for the GPU keys of the ResourceQuotas
    in `namespaces`, with the latest quota refusal among `events` (FailedCreate).

    Where several quotas in a namespace cap one resource, the tightest one counts:
    it is the one that refuses pods first.
    """
    usage = {}
    for quota in quotas:
        namespace = quota["metadata"].get("namespace")
        if namespace not in namespaces:
            continue
        hard = ((quota.get("spec") or {}).get("hard")) or {}
        used = ((quota.get("status") or {}).get("used")) or {}
        for key, cap in hard.items():
            resource = key.removeprefix(QUOTA_PREFIX)
            if not key.startswith(QUOTA_PREFIX) or not is_gpu_resource(resource):
                continue
            figures = QuotaFigures(hard=count(cap), used=count(used.get(key, 0)))
            current = usage.setdefault(namespace, {}).get(resource)
            if current is None or figures.hard - figures.used < current.hard - current.used:
                usage[namespace][resource] = figures
    for event in events:
        namespace = (event.get("metadata") or {}).get("namespace")
        stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
        for resource in refused_resources(event.get("message")):
            figures = usage.get(namespace, {}).get(resource)
            if figures is not None and stamp >= figures.refused_at:
                figures.refused_at, figures.refused_message = stamp, event["message"]
    return usage
