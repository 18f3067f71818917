"""The floor under a flavor's capacity: it may not go below what is reserved.

The catalog is this app's, but what is reserved of it is the business of the
features above it (approved quota; batch windows, which gpu_requests counts
with its own). They tell this module through two registries, filled in their
`AppConfig.ready()`, so that cluster imports none of them:

    from cluster import capacity
    capacity.register_reserved(reserved_levels)
    # reserved_levels(flavor, now) -> [(instant, GPUs reserved from it on)],
    # the first at `now`, the rest the later steps in order
    capacity.on_capacity_changed(record)
    # record(flavor, old, gpus, *, by, reason): called inside the change's transaction

A third registry tells the inventory which GPUs an XID made unusable (billing
reads GPU health from dcgm-exporter through Prometheus):

    capacity.register_gpu_health(unusable_gpus)
    # unusable_gpus() -> {node: [{gpu, code, meaning}]}, or None when unknown

A capacity override (cluster.actions) and the catalog's admin both change
capacity through `change_capacity`; every reader asks `capacity_of`.
"""

from django.db import transaction
from django.utils import timezone

from cluster.models import Flavor, FlavorCapacity, GpuNode
from teams import access
from teams.errors import ActionError, IllegalTransition, NotAllowed

_reserved = []  # one count: gpu_requests', which adds batch windows' to the quota's
_changed = []
_health = []


def register_reserved(source):
    """The count of what is reserved; a second registration replaces the first
    (ready() may run twice: tests, reloads)."""
    _reserved[:] = [source]
    return source


def register_gpu_health(source):
    """The source of unusable GPUs; a second registration replaces the first."""
    _health[:] = [source]
    return source


def unusable_gpus():
    """{node: [{gpu, code, meaning}]} of GPUs an XID made unusable, as the registered
    source says; None when there is none or it cannot tell (then the allocatable
    the device plugin reports is all the inventory goes by)."""
    return _health[0]() if _health else None


def on_capacity_changed(callback):
    if callback not in _changed:
        _changed.append(callback)
    return callback


def capacity_of(flavor):
    """Devices of `flavor` that can run now: what approvals and batch windows may
    reserve. The inventory's count (cluster.actions.record_inventory: healthy
    GPUs on Ready, uncordoned nodes, `inventory.healthy_gpus`), or an admin's
    override or catalog entry. No query."""
    return flavor.capacity


def capacity_where(flavor, hosts):
    """Of `capacity_of(flavor)`, the devices on nodes whose labels `hosts(labels)`
    accepts: the capacity less the devices the inventory last counted on Ready,
    schedulable nodes serving the flavor (`FlavorCapacity.nodes`, the nodes
    `inventory.node_serves_flavor` matched) that `hosts` refuses. Without an
    inventory (or with an override the inventory does not show yet), only the nodes
    seen can be refused. Two queries."""
    nodes = FlavorCapacity.objects.filter(flavor=flavor).values_list("nodes", flat=True).first()
    kept_off = _kept_off({flavor.pk: nodes or {}}, hosts)
    return max(capacity_of(flavor) - kept_off[flavor.pk], 0)


def capacities_where(flavor_ids, hosts):
    """{flavor id: `capacity_where(flavor, hosts)`} of the flavors the inventory has
    seen among `flavor_ids` (the others: nothing to refuse). Two queries."""
    flavors = list(
        Flavor.objects.filter(pk__in=flavor_ids, inventory__isnull=False).select_related(
            "inventory"
        )
    )
    kept_off = _kept_off({f.pk: f.inventory.nodes or {} for f in flavors}, hosts)
    return {f.pk: max(capacity_of(f) - kept_off[f.pk], 0) for f in flavors}


def _kept_off(nodes_by_flavor, hosts):
    """{flavor id: devices on its Ready, schedulable nodes whose labels `hosts`
    refuses}, from {flavor id: {node: devices}}. One query."""
    names = {name for nodes in nodes_by_flavor.values() for name in nodes}
    seen = GpuNode.objects.filter(name__in=names, ready=True, cordoned=False)
    refused = {name for name, labels in seen.values_list("name", "labels") if not hosts(labels)}
    return {
        flavor_id: sum(devices for name, devices in nodes.items() if name in refused)
        for flavor_id, nodes in nodes_by_flavor.items()
    }


class OverCommitted(ActionError):
    """A capacity below what is already reserved, with where it would not fit."""

    def __init__(self, flavor, capacity, peak, first, instants):
        self.flavor, self.capacity, self.peak = flavor, capacity, peak
        super().__init__(
            f"{flavor.name} cannot go down to {capacity} GPUs: up to {peak} are already "
            f"reserved (approved or active), first over it from "
            f"{first:%Y-%m-%d %H:%M} UTC, at {instants} moment(s) in all. "
            "Revoke or move those reservations first."
        )


def reserved_levels(flavor, now):
    """[(instant, GPUs reserved from it on)] from `now`, as the registered count
    says (none registered: nothing reserved)."""
    return [level for source in _reserved for level in source(flavor, now)]


def check_capacity(flavor, gpus, now=None):
    """Raise OverCommitted if reservations from now on exceed `gpus`.
    One query per reservation source."""
    now = now or timezone.now()
    over = [(instant, level) for instant, level in reserved_levels(flavor, now) if level > gpus]
    if over:
        peak = max(level for _, level in over)
        raise OverCommitted(flavor, gpus, peak, over[0][0], len(over))


@transaction.atomic
def change_capacity(flavor, gpus, *, by, reason=""):
    """Set how many GPUs of a flavor approvals may reserve; refused below what
    is already reserved. The registered callbacks record it (gpu_requests: one
    audit event, no team, old and new in the reason)."""
    if not access.can_review(by):
        raise NotAllowed("Only platform admins can change capacity.")
    if gpus < 0:
        raise IllegalTransition("Capacity cannot be negative.")
    # The lock approvals take: no approval slips in between check and change.
    flavor = Flavor.objects.select_for_update().get(pk=flavor.pk)
    old = flavor.capacity
    if gpus == old:
        return flavor
    if gpus < old:
        check_capacity(flavor, gpus)
    Flavor.objects.filter(pk=flavor.pk).update(capacity=gpus)
    flavor.capacity = gpus
    for callback in _changed:
        callback(flavor, old, gpus, by=by, reason=reason)
    return flavor
