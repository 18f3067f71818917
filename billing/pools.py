"""Node pools and scale to zero (issue 20): per pool of GPU nodes, what sat
unallocated over the last day and week, which nodes hold no GPU pod now and
what they cost per hour, and what an autoscaler with scale-to-zero would have
saved last week.

The portal does not manage node pools; it tells the admin what the cluster
autoscaler or Karpenter would need to know. The pools and their nodes are the
inventory's (`cluster.models.GpuNode.pool`, from the pool label); which flavor
a node's devices are is the inventory's one rule, recorded per flavor in
`FlavorCapacity.nodes`. Unallocated GPU-hours come from the ledger
(`FlavorHour`: capacity less what pods of teams and of other namespaces held),
split between a flavor's pools by their share of its devices now: a pool
that was resized during the week is counted with today's size.

The saving is an upper bound: an autoscaler removes a node only when all of
its GPUs are free, so it saves at most the price of the unallocated GPU-hours.

From Prometheus (three instant queries, kube-state-metrics' series): the
autoscaler labels each pool's nodes carry (`kube_node_labels`, as far as the
exporter's label allowlist lets them through), and the GPU pods waiting
unscheduled now (requests with `node=""`, phase Pending) with since when
(the first Pending sample within the week, to five minutes). A pending pod has
no node yet, so it is listed under every pool that offers its resource.
Without Prometheus the panel says so and shows the rest.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Q, Sum

from billing import prometheus
from billing.metering import sanitize
from billing.models import MONEY, FlavorHour, PerHour
from cluster.inventory import POOL_LABELS
from cluster.models import FlavorCapacity, GpuNode

# The name shown for nodes that carry none of the pool labels the inventory reads.
NO_POOL = "(no pool label)"
# Node labels of Karpenter and of the cloud node groups the cluster autoscaler scales.
AUTOSCALER_LABELS = (*POOL_LABELS, "karpenter.sh/capacity-type", "node.kubernetes.io/instance-type")
PENDING_SINCE_STEP = "5m"


@dataclass
class PendingPod:
    namespace: str
    name: str
    resource: str  # kube-state-metrics' spelling, e.g. nvidia_com_gpu
    gpus: int
    since: object  # aware datetime, or None when Prometheus has no Pending sample


@dataclass
class IdleNode:
    name: str
    gpus: int
    cost_per_hour: Decimal | None  # None: no flavor of the catalog is on it


@dataclass
class Pool:
    name: str
    nodes: int = 0
    gpus: int = 0
    allocated_now: int = 0
    idle_nodes: list = field(default_factory=list)  # [IdleNode]: no GPU pod now
    unallocated_day: Decimal = Decimal(0)  # GPU-hours
    unallocated_week: Decimal = Decimal(0)
    saving_week: Decimal = Decimal(0)  # at most, in the currency
    resources: set = field(default_factory=set)  # kube-state-metrics' spelling
    labels: set = field(default_factory=set)  # "key=value" of autoscaler labels (then sorted)
    pending: list = field(default_factory=list)  # [PendingPod] that its resources could run

    @property
    def idle_cost_per_hour(self):
        return sum((node.cost_per_hour or 0 for node in self.idle_nodes), Decimal(0))

    @property
    def idle_gpus(self):
        return sum(node.gpus for node in self.idle_nodes)


def _unallocated(seconds_field, since):
    return PerHour(Sum(seconds_field, filter=Q(hour__gte=since), output_field=MONEY))


def unallocated_by_flavor(now):
    """{flavor_id: (GPU-hours last day, GPU-hours last week, their price last week)}
    from the ledger. One query."""
    free = F("capacity_seconds") - F("team_allocated_seconds") - F("other_allocated_seconds")
    day, week = now - timedelta(days=1), now - timedelta(days=7)
    rows = (
        FlavorHour.objects.filter(hour__gte=week, hour__lt=now)
        .values("flavor_id")
        .annotate(
            day=_unallocated(free, day),
            week=_unallocated(free, week),
            cost=_unallocated(free * F("price"), week),
        )
        .order_by()
    )
    return {row["flavor_id"]: (row["day"], row["week"], row["cost"]) for row in rows}


def node_pools(now):
    """[Pool] by name, from the inventory and the ledger. Three queries."""
    nodes = list(GpuNode.objects.all())
    inventories = list(FlavorCapacity.objects.select_related("flavor"))
    unallocated = unallocated_by_flavor(now)
    pool_of = {node.name: node.pool or NO_POOL for node in nodes}
    pools = {name: Pool(name) for name in sorted(set(pool_of.values()))}
    cost_of_node = defaultdict(Decimal)
    for inventory in inventories:
        flavor_nodes = {n: d for n, d in (inventory.nodes or {}).items() if n in pool_of}
        devices = sum(flavor_nodes.values())
        day, week, cost = unallocated.get(inventory.flavor_id, (0, 0, 0))
        for node, count in flavor_nodes.items():
            cost_of_node[node] += count * inventory.flavor.price_per_gpu_hour
            pool, share = pools[pool_of[node]], Decimal(count) / devices
            pool.unallocated_day += (day or 0) * share
            pool.unallocated_week += (week or 0) * share
            pool.saving_week += (cost or 0) * share
    for node in nodes:
        pool = pools[pool_of[node.name]]
        gpus, held = sum(node.allocatable.values()), sum(node.allocated.values())
        pool.nodes += 1
        pool.gpus += gpus
        pool.allocated_now += held
        pool.resources |= {sanitize(resource) for resource in node.allocatable}
        if not held:
            pool.idle_nodes.append(IdleNode(node.name, gpus, cost_of_node.get(node.name)))
    return list(pools.values()), pool_of


_SANITISED = {f"label_{sanitize(key)}": key for key in AUTOSCALER_LABELS}
PENDING = (
    'sum by (namespace, pod, resource) (kube_pod_container_resource_requests{unit="integer",'
    'node="",resource=~"nvidia_com_.+|.+_deviceclass_resource_k8s_io_devices"})'
    " * on (namespace, pod) group_left () "
    '(max by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) == 1)'
)
PENDING_PHASE = 'kube_pod_status_phase{phase="Pending"}'
PENDING_SINCE = (
    f"min by (namespace, pod) (min_over_time((timestamp({PENDING_PHASE}) and {PENDING_PHASE} == 1)"
    f"[7d:{PENDING_SINCE_STEP}]))"
)


def autoscaler_labels(at):
    """{node: {"key=value"}} of the autoscaler labels kube-state-metrics exports. A query."""
    labels = defaultdict(set)
    for series in prometheus.query("last_over_time(kube_node_labels[1h])", at=at):
        for name, value in series.labels.items():
            if name in _SANITISED and value:
                labels[series.labels.get("node", "")].add(f"{_SANITISED[name]}={value}")
    return labels


def pending_pods(at):
    """[PendingPod] of the GPU pods unscheduled now, longest waiting first. Two queries."""
    since = {
        (s.labels.get("namespace"), s.labels.get("pod")): s.points[0][1]
        for s in prometheus.query(PENDING_SINCE, at=at)
        if s.points
    }
    pods = []
    for series in prometheus.query(PENDING, at=at):
        key = (series.labels.get("namespace", ""), series.labels.get("pod", ""))
        first = since.get(key)
        pods.append(
            PendingPod(
                *key,
                resource=series.labels.get("resource", ""),
                gpus=int(series.points[0][1]) if series.points else 0,
                since=None if first is None else datetime.fromtimestamp(first, UTC),
            )
        )
    return sorted(pods, key=lambda pod: (pod.since is None, pod.since or 0, pod.name))


def panel(now):
    """The cluster page's "Node pools" panel (hooks.on_cluster_panel)."""
    pools, pool_of = node_pools(now)
    problem = ""
    try:
        labels, pending = autoscaler_labels(now), pending_pods(now)
    except prometheus.PrometheusError as exc:
        labels, pending, problem = {}, [], str(exc)
    by_name = {pool.name: pool for pool in pools}
    for node, pool_name in pool_of.items():
        by_name[pool_name].labels |= labels.get(node, set())
    for pool in pools:
        pool.labels = sorted(pool.labels)
        pool.pending = [pod for pod in pending if pod.resource in pool.resources]
    context = {"pools": pools, "pending": pending, "problem": problem, "now": now}
    return "billing/_node_pools.html", context
