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
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.db.models import F, Q, Sum

from billing.models import MONEY, FlavorHour, PerHour
from cluster.models import FlavorCapacity, GpuNode

# The name shown for nodes that carry none of the pool labels the inventory reads.
NO_POOL = "(no pool label)"


@dataclass
class IdleNode:
    name: str
    gpus: int
    cost_per_hour: Decimal


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

    @property
    def idle_cost_per_hour(self):
        return sum((node.cost_per_hour for node in self.idle_nodes), Decimal(0))


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
        if not held:
            pool.idle_nodes.append(IdleNode(node.name, gpus, cost_of_node[node.name]))
    return list(pools.values())


def panel(now):
    """The cluster page's "Node pools" panel (hooks.on_cluster_panel)."""
    return "billing/_node_pools.html", {"pools": node_pools(now)}
