"""State changes of the cluster layer: recording the inventory, pinning capacity."""

from dataclasses import asdict

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cluster import kube
from cluster.inventory import quota_usage, take_inventory
from cluster.models import FlavorCapacity, GpuNode, NamespaceQuota
from gpu_requests import actions as quota_actions
from gpu_requests.models import Flavor, Team, namespace_of


def record_inventory(cluster=None, now=None):
    """Read Nodes and Pods; record GPU nodes and each flavor's devices and allocation.

    The devices become the flavor's capacity for approvals (Flavor.capacity), so
    the approval check counts what the cluster has, at no extra query.

    Four LISTs (plus one per further page of 500): Nodes, Pods, ResourceQuotas
    and quota refusals (FailedCreate events). A flavor's devices are the
    allocatable of its resource name on schedulable, Ready nodes that serve it
    (cluster.inventory.node_serves_flavor); allocated is what pods bound to
    those nodes ask for. Each team namespace's GPU quota and what its pods use
    of it (`status.used`) become `NamespaceQuota` rows, read by the pages.
    """
    cluster = cluster or kube.cluster()
    now = now or timezone.now()
    flavors = list(Flavor.objects.all())
    inventory = take_inventory(cluster.list("Node"), cluster.list("Pod"), flavors)
    team_of = {namespace_of(slug): pk for pk, slug in Team.objects.values_list("pk", "slug")}
    usage = quota_usage(
        cluster.list("ResourceQuota"),
        cluster.list("Event", field_selector="reason=FailedCreate"),
        team_of,
    )
    with transaction.atomic():
        NamespaceQuota.objects.all().delete()
        NamespaceQuota.objects.bulk_create(
            NamespaceQuota(
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
        GpuNode.objects.all().delete()
        GpuNode.objects.bulk_create(
            GpuNode(**asdict(node), observed_at=now) for node in inventory.nodes
        )
        for flavor in flavors:
            figures = inventory.flavors[flavor.slug]
            capacity, _ = FlavorCapacity.objects.update_or_create(
                flavor=flavor,
                defaults={
                    "devices": figures.devices,
                    "allocated": figures.allocated,
                    "observed_at": now,
                },
            )
            # Flavor.capacity is what approvals check: the cluster's count from
            # now on, unless an admin pinned another.
            pinned = figures.devices if capacity.override is None else capacity.override
            Flavor.objects.filter(pk=flavor.pk).update(capacity=pinned)
    return len(inventory.nodes)


def set_capacity_override(flavor, override, *, by):
    """Pin a flavor's capacity (None: follow the inventory again)."""
    if not quota_actions.can_review(by):
        raise quota_actions.NotAllowed("Only platform admins can set capacity.")
    with transaction.atomic():
        capacity, _ = FlavorCapacity.objects.get_or_create(flavor=flavor)
        capacity.override = override
        capacity.save(update_fields=["override"])
        pinned = override if override is not None else capacity.devices
        if pinned is not None:
            # Refused below what is reserved; audited.
            quota_actions.change_capacity(flavor, pinned, by=by, reason="capacity override")
