"""The cluster's GPU inventory, from plain Node and Pod dicts (no API calls, no database).

The one rule "this node serves this flavor" lives here (`node_serves_flavor`):
the inventory counts capacity with it, batch placement and billing's mapping of
a GPU to a flavor reuse it. For a DRA flavor the rule is about devices: a
ResourceSlice's device serves the flavor when its DeviceClass's selectors and
the flavor's own selector match it (`device_serves_flavor`), and a node serves
the flavor when one of its devices does. Everything here is a pure function,
tested by comparing its output.
"""

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from cluster import devices as device_selectors

# Node labels naming the node's pool, by the tool that made the pool.
POOL_LABELS = (
    "kubesim.io/pool",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "eks.amazonaws.com/nodegroup",
    "agentpool",  # AKS before it added the kubernetes.azure.com/ spelling
)
# Set by NVIDIA GPU feature discovery.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# Spot (preemptible) capacity, by the tool that made the node.
SPOT_LABELS = {
    "karpenter.sh/capacity-type": "spot",
    "cloud.google.com/gke-spot": "true",
    "kubernetes.azure.com/scalesetpriority": "spot",
}
# GPU node pools carry the taint nvidia.com/gpu:NoSchedule (its key is the resource
# name); this is the toleration a flavor's pods need to land there, the one the demo
# catalogs give their flavors.
GPU_TAINT = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


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


def unusable_devices(node, resource, gpus):
    """Devices of `resource` on `node` lost to `gpus` GPUs unusable by an XID: one
    per GPU for a whole GPU, a MIG or time-sliced resource's share of each GPU
    (its count over `nvidia.com/gpu.count`) for the others."""
    if not gpus:
        return 0
    total = count(((node.get("status") or {}).get("capacity") or {}).get(resource, 0))
    total = max(total, allocatable_gpus(node).get(resource, 0))
    # Without GPU feature discovery's count, a device per GPU.
    physical = count(labels_of(node).get(GPU_COUNT_LABEL, 0))
    per_gpu = max(total // physical, 1) if physical else 1
    return min(per_gpu * gpus, total)


def healthy_gpus(node, unusable_gpus=0):
    """{resource: devices} of the node's allocatable less the devices of the
    `unusable_gpus` GPUs an XID made unusable (GPU health). The device plugin may
    already have taken an unhealthy GPU out of the allocatable: counted once, from
    the node's capacity, whichever saw it first."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    healthy = {}
    for resource, offered in allocatable_gpus(node).items():
        present = max(count(capacity.get(resource, offered)), offered)
        lost = unusable_devices(node, resource, unusable_gpus)
        healthy[resource] = max(min(offered, present - lost), 0)
    return healthy


def unusable_count(xids):
    """GPUs among [{gpu, code, meaning}] (a GPU may report several XIDs)."""
    return len({xid["gpu"] for xid in xids})


def is_open(node):
    """Pods can be placed on it: Ready and not cordoned (`spec.unschedulable`)."""
    return is_ready(node) and not (node.get("spec") or {}).get("unschedulable")


def node_serves_flavor(node, flavor, dra=None):
    """THE rule: `node` (a Node dict) serves `flavor` (anything with `resource_name`
    and `node_selector`, e.g. a Flavor) when it offers the flavor's resource name
    and its labels carry every key=value of the flavor's node selector.

    A DRA flavor (`device_class` set) is served by the nodes whose ResourceSlices
    (in `dra`, a `Dra`) list a device that serves it; without `dra`, by none. A
    node offers an extended resource through DRA too, when a DeviceClass maps it
    (`spec.extendedResourceName`) and the node has devices of that class.

    Flavors sharing a resource name are told apart only by their selectors.
    Readiness, cordons and taints are not part of it: a cordoned node still
    serves its flavor, it just offers no capacity now.
    """
    if getattr(flavor, "device_class", ""):
        return dra is not None and bool(dra.devices_of(flavor, node["metadata"]["name"]))
    if flavor.resource_name not in allocatable_gpus(node) and not (
        dra is not None and dra.mapped_devices(flavor.resource_name, node["metadata"]["name"])
    ):
        return False
    labels = labels_of(node)
    return all(labels.get(key) == value for key, value in (flavor.node_selector or {}).items())


def node_flavors(node, flavors, dra=None):
    """The flavors of `flavors` that `node` serves, in the order given."""
    return [flavor for flavor in flavors if node_serves_flavor(node, flavor, dra)]


# --- DRA: devices from ResourceSlices, allocations from ResourceClaims ---

DRA_UNAVAILABLE = "DRA is not available on this cluster (it does not serve resource.k8s.io/v1)."


@dataclass(frozen=True)
class Device:
    """One device a ResourceSlice publishes."""

    node: str  # "" for devices not bound to one node (see `reach`)
    driver: str
    pool: str
    name: str
    spec: dict  # the slice's `devices[]` entry: attributes, capacity, consumesCounters
    reach: str = ""  # for node: "": ALL_NODES or NODE_SELECTOR (then `selector`)
    selector: list = field(default_factory=list)  # the NodeSelector's terms, for NODE_SELECTOR

    @property
    def key(self):
        return (self.driver, self.pool, self.name)

    @cached_property
    def consumes(self):
        """{(driver, pool, counter set): {counter: Decimal}} this device draws on
        (a partitionable device: a MIG device, or the whole GPU it is carved from)."""
        drawn = {}
        for item in self.spec.get("consumesCounters") or []:
            counters = drawn.setdefault((self.driver, self.pool, item.get("counterSet")), {})
            for name, counter in (item.get("counters") or {}).items():
                counters[name] = _quantity(counter.get("value"))
        return drawn


ALL_NODES = "all nodes"
NODE_SELECTOR = "nodes by selector"


@lru_cache(maxsize=4096)  # counters repeat the same few values thousands of times
def _quantity(value):
    try:
        return device_selectors.parse_quantity(value)
    except device_selectors.SelectorError:
        return device_selectors.parse_quantity("0")


def current_slices(slices):
    """The slices of the newest generation of each pool (Kubernetes ignores older
    slices of a pool still being republished)."""
    newest = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        if int(pool.get("generation") or 0) == newest[key]:
            yield spec


def _placement(spec):
    """(node, reach, selector terms) of a slice's spec, or of a device entry (with
    perDeviceNodeSelection); None when it names none of them."""
    if spec.get("nodeName"):
        return spec["nodeName"], "", ()
    if spec.get("allNodes"):
        return "", ALL_NODES, ()
    if spec.get("nodeSelector"):
        terms = (spec["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        return "", NODE_SELECTOR, terms
    return None


def _requirement_met(requirement, values):
    """One NodeSelectorRequirement against {key: value} (labels or fields)."""
    key, operator = requirement.get("key"), requirement.get("operator")
    wanted = requirement.get("values") or []
    if operator == "In":
        return values.get(key) in wanted
    if operator == "NotIn":
        return values.get(key) not in wanted
    if operator == "Exists":
        return key in values
    if operator == "DoesNotExist":
        return key not in values
    if operator in ("Gt", "Lt") and wanted and count(values.get(key, "")) and count(wanted[0]):
        number, bound = count(values[key]), count(wanted[0])
        return number > bound if operator == "Gt" else number < bound
    return False


def node_selected(node, terms):
    """True if `node` meets one of a NodeSelector's `terms` (each: all its
    matchExpressions on labels and matchFields on metadata.name)."""
    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        all(_requirement_met(r, labels_of(node)) for r in term.get("matchExpressions") or [])
        and all(_requirement_met(r, fields) for r in term.get("matchFields") or [])
        for term in terms
    )


def slice_devices(slices):
    """[Device] of the newest generation of each pool. Slices holding only shared
    counters (partitionable devices) list no devices."""
    found = []
    for spec in current_slices(slices):
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        where = _placement(spec) or ("", "", [])
        for device in spec.get("devices") or []:
            node, reach, selector = _placement(device) or where
            found.append(Device(node, driver, pool, device["name"], device, reach, selector))
    return found


def shared_counters(slices):
    """{(driver, pool, counter set): {counter: Decimal}} of the newest generation."""
    sets = {}
    for spec in current_slices(slices):
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        for item in spec.get("sharedCounters") or []:
            sets[(driver, pool, item.get("name"))] = {
                name: _quantity(counter.get("value"))
                for name, counter in (item.get("counters") or {}).items()
            }
    return sets


def _fits(consumes, left):
    return all(
        amount <= left.get(key, {}).get(name, 0)
        for key, counters in consumes.items()
        for name, amount in counters.items()
    )


def _draw(consumes, left):
    for key, counters in consumes.items():
        for name, amount in counters.items():
            left.setdefault(key, {})[name] = left.get(key, {}).get(name, 0) - amount


def share_counters(served, devices, sets, allocated):
    """{flavor slug: {device key}} each flavor counts, from `served` ({slug: [Device]
    that serve it}, in catalog order).

    A device drawing on no shared counters counts for every flavor it serves. The
    partitionable ones (a GPU and the MIG devices carved from it draw on one counter
    set) are counted once per hardware: each counter set goes to one flavor, the one
    with the most devices allocated from it (the hardware is in use that way) or,
    when none is, the one that fits the fewest devices in it (the whole GPU, ties in
    catalog order); that flavor counts its devices allocated there and as many of
    its free ones as the counters left by every allocation in the set still fit.
    """
    counted = {slug: {d.key for d in found if not d.consumes} for slug, found in served.items()}
    groups = {}  # the counter sets a device draws on -> {slug: [Device]}
    for slug, found in served.items():
        for device in found:
            if device.consumes:
                group = groups.setdefault(tuple(sorted(device.consumes)), {})
                group.setdefault(slug, []).append(device)
    drawn = {}  # counter set -> the allocated devices drawing on it, whichever flavor's
    for device in devices:
        if device.key in allocated:
            for key in device.consumes:
                drawn.setdefault(key, []).append(device)
    for set_keys, candidates in groups.items():
        left = {key: dict(sets.get(key, {})) for key in set_keys}
        for held in {d.key: d for key in set_keys for d in drawn.get(key, [])}.values():
            _draw(held.consumes, left)
        fits = {slug: _fit(found, left, allocated) for slug, found in candidates.items()}
        in_use = {
            slug: sum(d.key in allocated for d in found) for slug, found in candidates.items()
        }
        if any(in_use.values()):
            owner = max(candidates, key=lambda slug: in_use[slug])  # first of the most used
        else:
            fitting = [slug for slug in candidates if fits[slug]]
            owner = min(fitting, key=lambda slug: len(fits[slug])) if fitting else None
        if owner is not None:
            counted[owner] |= fits[owner]
    return counted


def _fit(found, left, allocated):
    """{device key} of `found` held (allocated) plus the free ones, by name, that the
    counters `left` still fit, one after another."""
    room = {key: dict(counters) for key, counters in left.items()}
    chosen = {d.key for d in found if d.key in allocated}
    for device in sorted(found, key=lambda d: d.name):
        if device.key not in chosen and _fits(device.consumes, room):
            _draw(device.consumes, room)
            chosen.add(device.key)
    return chosen


def class_terms(device_class):
    """The terms of a DeviceClass dict's selectors, all of which a device must meet
    (SelectorError when one is outside the subset the portal reads)."""
    terms = []
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            raise device_selectors.SelectorError("a selector that is not CEL")
        terms += device_selectors.parse_selector(expression)
    return terms


def allocated_devices(claims):
    """{(driver, pool, device)} allocated by ResourceClaims (`status.allocation`)."""
    allocated = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            allocated.add((result.get("driver"), result.get("pool"), result.get("device")))
    return allocated


class Dra:
    """What the cluster's DRA objects say, read once: DeviceClasses, the devices of
    ResourceSlices, the devices ResourceClaims hold."""

    def __init__(self, classes, slices, claims):
        self.classes = {}  # name -> [Term] | SelectorError
        # extended resource name -> classes that serve pods asking for it
        self.extended = {}
        for item in classes:
            mapped = (item.get("spec") or {}).get("extendedResourceName")
            if mapped:
                self.extended.setdefault(mapped, []).append(item["metadata"]["name"])
            try:
                self.classes[item["metadata"]["name"]] = class_terms(item)
            except device_selectors.SelectorError as exc:
                self.classes[item["metadata"]["name"]] = exc
        self.devices = slice_devices(slices)
        self.on_node = {}  # node -> [Device]: one pass, not one per node
        for device in self.devices:
            self.on_node.setdefault(device.node, []).append(device)
        self.sets = shared_counters(slices)
        self._served = {}  # flavor slug -> {node (None: all): [Device] serving it}
        self.claims = claims
        self.allocated = allocated_devices(claims)

    def counted(self, flavors):
        """{flavor slug: {device key}} counted for each DRA flavor (`share_counters`)."""
        served = {f.slug: self.devices_of(f) for f in flavors if f.device_class}
        return share_counters(served, self.devices, self.sets, self.allocated)

    def problem(self, flavor):
        """Why the portal cannot count `flavor`'s devices, or ""."""
        terms = self.classes.get(flavor.device_class)
        if terms is None:
            return f"DeviceClass {flavor.device_class} does not exist on the cluster."
        if isinstance(terms, device_selectors.SelectorError):
            return (
                f"DeviceClass {flavor.device_class} has a selector the portal does not read "
                f"({terms}); its devices are not counted."
            )
        return ""

    def devices_of(self, flavor, node=None):
        """[Device] that serve `flavor` (on `node`, if given)."""
        if self.problem(flavor):
            return []
        if flavor.slug not in self._served:  # matched once per flavor, then by node
            terms = self.classes[flavor.device_class] + flavor.selector_terms
            served = [device for device in self.devices if device_serves(device, terms)]
            self._served[flavor.slug] = by_node = {None: served}
            for device in served:
                by_node.setdefault(device.node, []).append(device)
        return self._served[flavor.slug].get(node, [])

    def mapped_devices(self, resource_name, node):
        """[Device] on `node` of the classes mapping `resource_name` (DRAExtendedResource:
        the scheduler makes a claim for a pod asking for it, from these devices)."""
        found = []
        for name in self.extended.get(resource_name, []):
            terms = self.classes[name]
            if not isinstance(terms, device_selectors.SelectorError):
                found += [d for d in self.on_node.get(node, []) if device_serves(d, terms)]
        return found

    def class_devices(self, node):
        """{class quota resource: devices on `node`} for each class the portal reads."""
        counts = {}
        for name, terms in self.classes.items():
            if isinstance(terms, device_selectors.SelectorError):
                continue
            served = [d for d in self.on_node.get(node, []) if device_serves(d, terms)]
            if served:
                counts[device_selectors.quota_resource(name)] = len(served)
        return counts

    def class_allocated(self, node):
        counts = {}
        for name, terms in self.classes.items():
            if isinstance(terms, device_selectors.SelectorError):
                continue
            held = [
                d
                for d in self.on_node.get(node, [])
                if d.key in self.allocated and device_serves(d, terms)
            ]
            if held:
                counts[device_selectors.quota_resource(name)] = len(held)
        return counts


# NVIDIA's DRA driver names devices gpu-<minor> and gpu-<minor>-mig-<profile id>-<start>-<size>.
_DRIVER_DEVICE = re.compile(r"^gpu-(\d+)(?:-mig-[^-]+-(\d+)(?:-\d+)?)?$")


def exporter_device(node, device_name):
    """(Hostname, gpu, GPU_I_ID): how dcgm-exporter labels the device a DRA
    driver names `device_name` on `node`, the one mapping billing and the control
    plane's fake exporter share. The GPU is the name's minor; a MIG device's
    instance is taken to be its placement start (the driver publishes no GPU
    instance id). None for a name of another driver."""
    match = _DRIVER_DEVICE.match(device_name)
    if match is None:
        return None
    return (node, match.group(1), match.group(2) or "")


@dataclass(frozen=True)
class ClaimedDevice:
    """One device a claim's allocation gives one pod (cluster.models.DraAllocation)."""

    claim_uid: str
    namespace: str
    claim: str
    pod: str
    pod_uid: str
    node: str
    driver: str
    pool: str
    device: str
    flavor: str  # the flavor's slug, "" when no flavor of the catalog serves it


def claimed_devices(dra, flavors):
    """[ClaimedDevice] of every allocated claim reserved for a pod. The flavor is
    the one of the request's DeviceClass whose selector is the request's own
    (as the portal writes them: batch templates, the team's example), else the
    first of that class (by primary key) that the device serves."""
    on_node = {device.key: device for device in dra.devices}
    serving = {}
    for flavor in sorted(flavors, key=lambda f: f.pk):
        if getattr(flavor, "device_class", ""):
            serving[flavor] = {device.key for device in dra.devices_of(flavor)}
    found = []
    for claim in dra.claims:
        meta, status = claim.get("metadata") or {}, claim.get("status") or {}
        pods = [r for r in status.get("reservedFor") or [] if r.get("resource") == "pods"]
        requests = {
            r.get("name"): r.get("exactly") or r
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for result in results:
            key = (result.get("driver"), result.get("pool"), result.get("device"))
            request = requests.get(result.get("request"), {})
            selector = " && ".join(
                (s.get("cel") or {}).get("expression", "") for s in request.get("selectors") or []
            )
            candidates = [
                f
                for f, keys in serving.items()
                if key in keys and f.device_class == request.get("deviceClassName")
            ]
            exact = [f for f in candidates if f.device_selector == selector]
            flavor = (exact or candidates or [None])[0]
            device = on_node.get(key)
            for pod in pods:
                found.append(
                    ClaimedDevice(
                        meta.get("uid", ""),
                        meta.get("namespace", ""),
                        meta.get("name", ""),
                        pod.get("name", ""),
                        pod.get("uid", ""),
                        device.node if device else "",
                        *key,
                        flavor.slug if flavor else "",
                    )
                )
    return found


def device_serves(device, terms):
    """THE rule for DRA: a device serves a flavor when it meets its class's
    selectors and the flavor's own (`terms`, both together)."""
    return device_selectors.device_matches(terms, device.spec, device.driver)


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
    # The node's labels, so what runs where (spot, zones) can be asked of the rows.
    labels: dict = field(default_factory=dict)
    # {resource: devices pods can be given now}: empty on a cordoned or NotReady
    # node, less the GPUs an XID made unusable (`healthy_gpus`).
    usable: dict = field(default_factory=dict)
    # [{gpu, code, meaning}]: the XIDs that made its GPUs unusable (GPU health).
    xids: list = field(default_factory=list)


@dataclass
class FlavorFigures:
    devices: int | None = 0  # what can run: on schedulable, Ready nodes, healthy GPUs
    allocated: int | None = 0  # held by pods (DRA: by claims) on every node that serves it
    free: int | None = 0  # of `devices`, those no pod holds
    nodes: dict = field(default_factory=dict)  # node -> devices of the flavor there
    problem: str = ""  # why the devices could not be counted (devices is then None or 0)


def gpu_node_figures(node, held, dra=None, xids=()):
    """The node's figures, or None if it offers no GPU (extended resources, or the
    devices of a DeviceClass in its ResourceSlices, keyed by the class's quota key).
    `xids`: [{gpu, code, meaning}] of its GPUs an XID made unusable."""
    name = node["metadata"]["name"]
    allocatable = allocatable_gpus(node)
    allocated = {k: v for k, v in held.get(name, {}).items() if k in allocatable}
    healthy = healthy_gpus(node, unusable_count(xids))
    if dra is not None:
        allocatable |= dra.class_devices(name)
        allocated |= dra.class_allocated(name)
        healthy |= dra.class_devices(name)
    if not any(allocatable.values()):
        return None
    labels = labels_of(node)
    spec = node.get("spec") or {}
    return GpuNodeFigures(
        name=name,
        pool=next((labels[key] for key in POOL_LABELS if labels.get(key)), ""),
        gpu_model=labels.get(GPU_PRODUCT_LABEL, ""),
        allocatable=allocatable,
        allocated=allocated,
        taints=spec.get("taints") or [],
        cordoned=bool(spec.get("unschedulable")),
        ready=is_ready(node),
        labels=dict(labels),
        usable=healthy if is_open(node) else {},
        xids=list(xids),
    )


@dataclass
class Inventory:
    nodes: list  # [GpuNodeFigures], GPU nodes only, in the order listed
    flavors: dict  # {flavor slug: FlavorFigures}, every flavor given


def take_inventory(nodes, pods, flavors, dra=None, xids=None):
    """GPU nodes and per-flavor figures from Node and Pod dicts, and for DRA flavors
    from `dra` (a `Dra`; None: the cluster has no DRA, and DRA flavors count 0
    with `DRA_UNAVAILABLE` as their problem). `xids`: {node: [{gpu, code,
    meaning}]} of the GPUs an XID made unusable (None: GPU health unknown).

    A flavor's `devices` are what can run now (the capacity approvals and the
    batch planner count): devices on Ready, uncordoned nodes, less GPUs an XID
    made unusable; `free` is what of them no pod holds.

    `flavors`: anything with `slug`, `resource_name`, `node_selector` and
    `device_class` (and `selector_terms` for DRA ones).
    """
    held = held_by_node(pods)
    counted = dra.counted(flavors) if dra is not None else {}
    gpu_nodes = []
    per_flavor = {flavor.slug: FlavorFigures() for flavor in flavors}
    dra_flavors = {flavor.slug for flavor in flavors if getattr(flavor, "device_class", "")}
    for flavor in flavors:
        if flavor.slug not in dra_flavors:
            continue
        problem = DRA_UNAVAILABLE if dra is None else dra.problem(flavor)
        per_flavor[flavor.slug].problem = problem
        if problem and dra is not None and flavor.device_class in dra.classes:
            unknown = per_flavor[flavor.slug]
            unknown.devices = unknown.allocated = unknown.free = None
    for node in nodes:
        figures = gpu_node_figures(node, held, dra, (xids or {}).get(node["metadata"]["name"], ()))
        if figures is None:
            continue
        gpu_nodes.append(figures)
        offers = bool(figures.usable)
        for flavor in node_flavors(node, flavors, dra):
            totals = per_flavor[flavor.slug]
            if flavor.slug in dra_flavors:
                served = dra.devices_of(flavor, figures.name)
                mine = [d for d in served if d.key in counted[flavor.slug]]
                if mine:
                    totals.nodes[figures.name] = len(mine)
                held_mine = sum(1 for d in mine if d.key in dra.allocated)
                totals.allocated += sum(1 for d in served if d.key in dra.allocated)
                if offers:
                    totals.devices += len(mine)
                    totals.free += len(mine) - held_mine
                continue
            here = figures.allocatable.get(flavor.resource_name, 0)
            lost = here - healthy_gpus(node, unusable_count(figures.xids)).get(
                flavor.resource_name, 0
            )
            held_here = figures.allocated.get(flavor.resource_name, 0)
            if dra is not None:  # devices of a class mapping the resource name
                mapped = dra.mapped_devices(flavor.resource_name, figures.name)
                here += len(mapped)
                held_here += sum(1 for d in mapped if d.key in dra.allocated)
            totals.nodes[figures.name] = here - lost
            totals.allocated += held_here
            if offers:
                totals.devices += here - lost
                totals.free += max(here - lost - held_here, 0)
    if dra is not None:
        _count_unbound(nodes, flavors, dra, counted, per_flavor)
    return Inventory(nodes=gpu_nodes, flavors=per_flavor)


def _count_unbound(nodes, flavors, dra, counted, per_flavor):
    """Devices not bound to one node (`allNodes`, `nodeSelector`): counted once, under
    ALL_NODES or NODE_SELECTOR, and offered when a Ready, schedulable node can reach them."""
    open_nodes = [n for n in nodes if is_open(n)]
    for flavor in flavors:
        if not getattr(flavor, "device_class", "") or dra.problem(flavor):
            continue
        totals = per_flavor[flavor.slug]
        for device in dra.devices_of(flavor):
            if device.node or device.key not in counted[flavor.slug]:
                continue
            totals.nodes[device.reach] = totals.nodes.get(device.reach, 0) + 1
            totals.allocated += device.key in dra.allocated
            if (
                device.reach == ALL_NODES
                and open_nodes
                or any(node_selected(n, device.selector) for n in open_nodes)
            ):
                totals.devices += 1
                totals.free += device.key not in dra.allocated


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


def quota_resource_of(key):
    """The resource a quota key caps (`requests.nvidia.com/gpu` -> `nvidia.com/gpu`;
    a DeviceClass's `...deviceclass.resource.k8s.io/devices` is its own), or None
    for a key that caps nothing this way (`requests.<class>.deviceclass...` is
    accepted by the API server and never enforced)."""
    if device_selectors.is_dra_quota_resource(key) and not key.startswith(("requests.", "limits.")):
        return key
    resource = key.removeprefix(QUOTA_PREFIX)
    if key.startswith(QUOTA_PREFIX) and not device_selectors.is_dra_quota_resource(resource):
        return resource
    return None


def refused_resources(message):
    """The resource names a quota refusal names ("exceeded quota: q, requested:
    requests.nvidia.com/gpu=1, used: ..."; for a ResourceClaim "requested:
    gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2"), or [] for any other message."""
    match = _REFUSED.search(message or "")
    if not match:
        return []
    keys = (part.split("=", 1)[0] for part in match.group(1).split(","))
    return [resource for key in keys if (resource := quota_resource_of(key))]


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
            resource = quota_resource_of(key)
            if resource is None or not is_gpu_resource(resource):
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
