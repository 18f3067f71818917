"""State changes of the cluster layer: recording the inventory, pinning capacity."""

import logging
from dataclasses import asdict

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cluster import capacity as catalog_capacity
from cluster import kube
from cluster.inventory import Dra, claimed_devices, quota_usage, take_inventory
from cluster.models import (
    Cluster,
    DraAllocation,
    Flavor,
    FlavorCapacity,
    GpuNode,
    NamespaceQuota,
    default_cluster,
)
from teams import access, errors
from teams.models import Team
from teams.namespaces import namespace_of

log = logging.getLogger(__name__)


def record_inventories(now=None):
    """Every cluster's inventory, one after the other: one that does not answer is
    marked so (and its last figures kept), and holds up none of the others.
    The number of clusters recorded."""
    recorded = 0
    for entry in Cluster.objects.all():
        try:
            record_inventory(now=now, entry=entry)
        except kube.ClusterError as exc:
            log.warning("Inventory of cluster %s failed: %s", entry.slug, exc)
            continue
        recorded += 1
    return recorded


def record_inventory(cluster=None, now=None, *, entry=None):
    """Read Nodes and Pods of `entry` (a Cluster; default: `default`, through
    `cluster`, its client); record GPU nodes and its flavors' devices and allocation,
    and what the cluster is (`Cluster`'s state: reachable, version, what it serves).

    The devices become the flavor's capacity for approvals (Flavor.capacity), so
    the approval check counts what the cluster has, at no extra query.

    Four LISTs (plus one per further page of 500): Nodes, Pods, ResourceQuotas
    and quota refusals (FailedCreate events); with DRA flavors in the catalog,
    four more: DeviceClasses, ResourceSlices, ResourceClaims (a DRA flavor's
    devices are those of its class's slices that its selector matches, allocated
    those the claims' allocation results name) and the pods' DRA quota refusals
    (FailedResourceClaimCreation events). A flavor's devices are the
    allocatable of its resource name on schedulable, Ready nodes that serve it
    (cluster.inventory.node_serves_flavor), less the GPUs an XID made unusable
    (the registered GPU health: billing's, one Prometheus query); allocated is
    what pods bound to those nodes ask for. Each team namespace's GPU quota and what its pods use
    of it (`status.used`) become `NamespaceQuota` rows, read by the pages.
    """
    entry = entry or Cluster.objects.get(pk=default_cluster())
    now = now or timezone.now()
    try:
        return _record_inventory(cluster or kube.cluster(entry), now, entry)
    except kube.ClusterError as exc:
        Cluster.objects.filter(pk=entry.pk).update(
            reachable=False, checked_at=now, problem=str(exc)[:2000]
        )
        raise


def _record_inventory(cluster, now, entry):
    state = read_state(cluster)
    flavors = list(Flavor.objects.filter(cluster=entry))
    dra = read_dra(cluster) if any(flavor.is_dra for flavor in flavors) else None
    inventory = take_inventory(
        cluster.list("Node"), cluster.list("Pod"), flavors, dra, catalog_capacity.unusable_gpus()
    )
    team_of = {namespace_of(slug): pk for pk, slug in Team.objects.values_list("pk", "slug")}
    refusals = cluster.list("Event", field_selector="reason=FailedCreate")
    if dra is not None:
        # A pod over its DRA quota is admitted and waits: the refusal is the claim
        # controller's Warning on the pod, not a FailedCreate on the Job.
        refusals += cluster.list("Event", field_selector="reason=FailedResourceClaimCreation")
    usage = quota_usage(cluster.list("ResourceQuota"), refusals, team_of)
    with transaction.atomic():
        Cluster.objects.filter(pk=entry.pk).update(
            **state, reachable=True, checked_at=now, inventory_at=now, problem=""
        )
        NamespaceQuota.objects.filter(cluster=entry).delete()
        NamespaceQuota.objects.bulk_create(
            NamespaceQuota(
                cluster=entry,
                team_id=team_of[namespace],
                resource_name=resource,
                hard=figures.hard,
                used=figures.used,
                refused_at=parse_datetime(figures.refused_at) if figures.refused_at else None,
                refused_message=figures.refused_message,
                observed_at=now,
            )
            for namespace, resources in usage.items()
            for resource, figures in resources.items()
        )
        GpuNode.objects.filter(cluster=entry).delete()
        GpuNode.objects.bulk_create(
            GpuNode(**asdict(node), cluster=entry, observed_at=now) for node in inventory.nodes
        )
        for flavor in flavors:
            figures = inventory.flavors[flavor.slug]
            capacity, _ = FlavorCapacity.objects.update_or_create(
                flavor=flavor,
                defaults={
                    "devices": figures.devices,
                    "allocated": figures.allocated,
                    "free": figures.free,
                    "nodes": figures.nodes,
                    "problem": figures.problem,
                    "observed_at": now,
                },
            )
            # Flavor.capacity is what approvals check: the cluster's count from
            # now on, unless an admin pinned another (or the devices could not
            # be counted: then it stays as it was).
            pinned = figures.devices if capacity.override is None else capacity.override
            if pinned is not None:
                Flavor.objects.filter(pk=flavor.pk).update(capacity=pinned)
        if dra is not None:
            record_allocations(claimed_devices(dra, flavors), flavors, now)
    return len(inventory.nodes)


def record_allocations(claimed, flavors, now):
    """Upsert the DRA devices claims give pods (one query): seen again, a row's
    `last_seen` moves on; rows of claims gone stay, for billing's past hours."""
    flavor_ids = {flavor.slug: flavor.pk for flavor in flavors}
    DraAllocation.objects.bulk_create(
        [
            DraAllocation(
                **{k: v for k, v in asdict(row).items() if k != "flavor"},
                flavor_id=flavor_ids.get(row.flavor),
                first_seen=now,
                last_seen=now,
            )
            for row in claimed
        ],
        update_conflicts=True,
        unique_fields=["claim_uid", "pod_uid", "driver", "pool", "device"],
        update_fields=["last_seen", "flavor", "node"],
    )


def read_state(cluster):
    """What the cluster is: its version and whether it serves DRA and admission
    policies (`Cluster`'s fields). One GET, and discovery's (cached)."""
    return {
        "version": str(cluster.call("GET", "/version").get("gitVersion", ""))[:64],
        "serves_dra": cluster.serves("DeviceClass"),
        "serves_admission_policies": cluster.serves("ValidatingAdmissionPolicy"),
    }


def read_dra(cluster):
    """The cluster's DeviceClasses, ResourceSlices and ResourceClaims as a `Dra`, or
    None when it does not serve resource.k8s.io/v1 (404). Three LISTs, each asked
    even after a 404, so a missing RBAC grant shows as a 403 on any cluster."""
    lists, served = [], True
    for kind in ("DeviceClass", "ResourceSlice", "ResourceClaim"):
        try:
            lists.append(cluster.list(kind))
        except kube.PermanentClusterError as exc:
            if exc.status != 404:
                raise
            served = False
    return Dra(*lists) if served else None


def set_capacity_override(flavor, override, *, by):
    """Pin a flavor's capacity (None: follow the inventory again)."""
    if not access.can_review(by):
        raise errors.NotAllowed("Only platform admins can set capacity.")
    with transaction.atomic():
        capacity, _ = FlavorCapacity.objects.get_or_create(flavor=flavor)
        capacity.override = override
        capacity.save(update_fields=["override"])
        pinned = override if override is not None else capacity.devices
        if pinned is not None:
            # Refused below what is reserved; audited.
            catalog_capacity.change_capacity(flavor, pinned, by=by, reason="capacity override")
