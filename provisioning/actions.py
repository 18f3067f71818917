"""Make the cluster match the database, team by team.

The database is the desired state (provisioning.desired); `sync_team` makes
the cluster match it with server-side apply under one field manager, writing
only the objects that differ. Work is marked in the database first
(`mark_dirty`) and queued on commit, so a lost message or a dead worker only
delays it until the next sweep.
"""

import logging
import uuid
from contextlib import nullcontext
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from gpu_requests import actions as quota_actions
from gpu_requests.models import AuditEvent, Flavor, QuotaRequest
from provisioning import kube
from provisioning.desired import desired_state, desired_states, digest, object_hash, object_key
from provisioning.models import FlavorCapacity, GpuNode, TeamSync

log = logging.getLogger(__name__)

Status = TeamSync.Status
PERMANENT_ERROR_ACTION = "sync_failed"
DRIFT_ACTION = "drift_repaired"


# --- marking and queueing ---


def _ensure_row(team_id):
    if not TeamSync.objects.filter(team_id=team_id).exists():
        try:
            with transaction.atomic():
                TeamSync.objects.create(team_id=team_id, generation=0)
        except IntegrityError:
            pass  # created meanwhile by another process


def mark_dirty(team_id):
    """Record that the team's desired state changed (one or two queries)."""
    _ensure_row(team_id)
    TeamSync.objects.filter(team_id=team_id).update(
        generation=F("generation") + 1,
        # A failing team stays failing (its error stays visible) until a sync succeeds.
        status=Case(
            When(status=Status.FAILING, then=Value(Status.FAILING)), default=Value(Status.PENDING)
        ),
    )


def enqueue(team_ids):
    """Queue syncs; a broker outage is logged, not raised (the sweep retries).

    `queued_at` is written before the messages go out, so a worker that starts
    at once always sees its claim (`last_attempt_at`) later than the queueing.
    """
    from provisioning.tasks import sync_team as sync_task

    team_ids = list(team_ids)
    TeamSync.objects.filter(team_id__in=team_ids).update(queued_at=timezone.now())
    queued, lost = [], []
    for team_id in team_ids:
        try:
            sync_task.apply_async((team_id,), retry=False)
        except Exception as exc:  # the broker's errors vary by transport
            log.warning("could not queue sync of team %s (the sweep will): %s", team_id, exc)
            lost.append(team_id)
        else:
            queued.append(team_id)
    TeamSync.objects.filter(team_id__in=lost).update(queued_at=None)
    return queued


def team_changed(team_id):
    """A team's quota, membership or state changed: mark it and queue a sync on commit."""
    with transaction.atomic():
        mark_dirty(team_id)
        transaction.on_commit(lambda: enqueue([team_id]))


# --- one team ---


def matches(desired, live):
    """True if every field we set has the same value live (defaults added are fine)."""
    if desired in ({}, []):
        # The API server leaves empty maps and lists out (omitempty).
        return live in (None, {}, [])
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            matches(value, live.get(key)) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(matches(d, lv) for d, lv in zip(desired, live, strict=True))
        )
    return desired == live


def _describe_drift(obj, live):
    name = f"{obj['kind']} {obj['metadata']['name']}"
    if live is None:
        return f"{name} was deleted outside the portal; recreated."
    if obj["kind"] == "ResourceQuota":
        want = obj["spec"]["hard"]
        have = (live.get("spec") or {}).get("hard") or {}
        changes = ", ".join(
            f"{key}: {have.get(key, 'unset')} -> {value}"
            for key, value in want.items()
            if have.get(key) != value
        )
        return f"{name} was changed outside the portal ({changes}); restored."
    return f"{name} was changed outside the portal; restored."


def reconcile(cluster, objects, applied):
    """Apply the objects that differ from the live ones.

    One GET per object (none after a missing namespace: nothing can be in it)
    and one apply per object that differs. A team never synced has nothing to
    compare with, so its objects are applied unread: server-side apply of what
    is already there changes nothing. Returns (applied hashes, writes, drift
    descriptions).
    """
    new_applied, writes, drift = {}, 0, []
    namespace_missing = not applied
    for obj in objects:
        key, wanted = object_key(obj), object_hash(obj)
        meta = obj["metadata"]
        live = None
        if not namespace_missing:
            live = cluster.get(obj["kind"], meta["name"], meta.get("namespace"))
            namespace_missing = obj["kind"] == "Namespace" and live is None
        if live is not None and matches(obj, live):
            new_applied[key] = wanted
            continue
        if applied.get(key) == wanted:
            drift.append(_describe_drift(obj, live))
        cluster.apply(obj, field_manager=settings.PORTAL_KUBE_FIELD_MANAGER)
        writes += 1
        new_applied[key] = wanted
    return new_applied, writes, drift


def _claim(team_id, now, *, force):
    """Claim the team's sync with one conditional UPDATE; a token, or None.

    None when another worker holds a live claim, or (unless `force`) when
    there is nothing to do: the team is in sync with its latest generation.
    """
    token = uuid.uuid4().hex
    claimable = TeamSync.objects.filter(team_id=team_id).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    )
    if not force:
        claimable = claimable.filter(
            Q(generation__gt=F("synced_generation")) | ~Q(status=Status.IN_SYNC)
        )
    claimed = claimable.update(
        claimed_until=now + timedelta(seconds=settings.PORTAL_SYNC_LEASE),
        claim_token=token,
        last_attempt_at=now,
    )
    return token if claimed else None


def _release(team_id, token):
    TeamSync.objects.filter(team_id=team_id, claim_token=token).update(
        claimed_until=None, claim_token=""
    )


def _record_error(team_id, token, generation, exc):
    """Show the error on the team; a permanent one also stops retries of this generation."""
    permanent = isinstance(exc, kube.PermanentClusterError)
    message = exc.message if permanent else str(exc)
    previous = TeamSync.objects.filter(team_id=team_id).values_list("last_error", flat=True).first()
    fields = {
        "status": Status.FAILING,
        "last_error": message,
        "last_error_status": exc.status or None,
        "last_error_at": timezone.now(),
    }
    if permanent:
        fields["refused_generation"] = F("generation") if generation is None else generation
    TeamSync.objects.filter(team_id=team_id, claim_token=token).update(**fields)
    if permanent and message != previous:
        AuditEvent.objects.create(
            team_id=team_id, action=PERMANENT_ERROR_ACTION, reason=f"Cluster refused: {message}"
        )


def sync_team(team_id, *, cluster=None, force=False):
    """Make the cluster match the team's desired state. Idempotent.

    Four queries and one GET per object (one GET in all for a new namespace),
    plus one apply per object that differs. A team already in sync is skipped
    after one query, with no API calls, unless `force`. Returns the number of
    writes, or None if it did nothing (in sync, or held by another worker). Raises
    TransientClusterError (retry later) or PermanentClusterError (don't), both
    recorded on the team first.
    """
    now = timezone.now()
    token = _claim(team_id, now, force=force)
    if token is None:
        if TeamSync.objects.filter(team_id=team_id).exists():
            return None
        _ensure_row(team_id)
        token = _claim(team_id, now, force=force)
        if token is None:
            return None
    writes = 0
    generation = None
    released = False
    try:
        cluster = cluster or kube.cluster()
        # A change that lands while we sync bumps the generation: go round again.
        for _ in range(3):
            row = TeamSync.objects.select_related("team").get(team_id=team_id)
            generation = row.generation
            objects = desired_state(team_id, row=row).objects()
            applied, count, drift = reconcile(cluster, objects, row.applied)
            writes += count
            # BEGIN and COMMIT are two more round trips: only drift needs them,
            # to record the repair together with the sync.
            with transaction.atomic() if drift else nullcontext():
                for description in drift:
                    AuditEvent.objects.create(
                        team_id=team_id, action=DRIFT_ACTION, reason=description
                    )
                done = timezone.now()
                saved = {
                    "applied": applied,
                    "synced_digest": digest(objects),
                    "synced_generation": generation,
                    "last_synced_at": done,
                    "last_checked_at": done,
                    "last_error": "",
                    "last_error_status": None,
                    "last_error_at": None,
                }
                # Done, and the claim released, unless the generation moved meanwhile.
                released = TeamSync.objects.filter(
                    team_id=team_id, claim_token=token, generation=generation
                ).update(**saved, status=Status.IN_SYNC, claimed_until=None, claim_token="")
                if not released:
                    TeamSync.objects.filter(team_id=team_id, claim_token=token).update(
                        **saved, status=Status.PENDING
                    )
            if released:
                break
    except kube.ClusterError as exc:
        _record_error(team_id, token, generation, exc)
        raise
    finally:
        if not released:
            _release(team_id, token)
    return writes


# --- all teams ---


def sweep(now=None):
    """Queue a sync for every team that needs one. A few queries, no API calls.

    A team needs one when it was marked and not synced (and nobody holds it, or
    its holder died), or when its desired state no longer has the digest last
    synced (a change nobody marked, such as a new member).
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.PORTAL_SYNC_LEASE)
    rows = TeamSync.objects.filter(namespace_deleted_at__isnull=True)
    synced = dict(rows.values_list("team_id", "synced_digest"))
    changed = [
        team_id
        for team_id, state in desired_states(list(synced)).items()
        if state.digest() != synced[team_id]
    ]
    unmarked = rows.filter(team_id__in=changed, generation__lte=F("synced_generation"))
    for team_id in unmarked.values_list("team_id", flat=True):
        mark_dirty(team_id)
    due = (
        rows.filter(generation__gt=F("synced_generation"))
        .filter(generation__gt=F("refused_generation"))
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        # Not while a message queued since the last attempt is still waiting
        # (unless it has waited a whole lease: then it was probably lost).
        .filter(
            Q(queued_at__isnull=True)
            | Q(queued_at__lt=F("last_attempt_at"))
            | Q(queued_at__lt=stale)
        )
        .values_list("team_id", flat=True)
    )
    return enqueue(list(due))


def check_drift(cluster=None):
    """Compare every in-sync team's objects with the live ones; queue the teams that differ.

    One LIST per kind for the whole cluster (paged by 500), whatever the number
    of teams; the syncs queued then repair and record what they find.
    """
    cluster = cluster or kube.cluster()
    rows = TeamSync.objects.filter(namespace_deleted_at__isnull=True, status=Status.IN_SYNC)
    states = desired_states(list(rows.values_list("team_id", flat=True)))
    live = {}
    selector = "app.kubernetes.io/managed-by=gpu-portal"
    for kind in ("Namespace", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy"):
        for item in cluster.list(kind, label_selector=selector):
            meta = item["metadata"]
            live[(kind, meta.get("namespace"), meta["name"])] = item
    drifted = []
    for team_id, state in states.items():
        for obj in state.objects():
            meta = obj["metadata"]
            found = live.get((obj["kind"], meta.get("namespace"), meta["name"]))
            if found is None or not matches(obj, found):
                drifted.append(team_id)
                break
    TeamSync.objects.filter(team_id__in=states).exclude(team_id__in=drifted).update(
        last_checked_at=timezone.now()
    )
    for team_id in drifted:
        mark_dirty(team_id)
    enqueue(drifted)
    return drifted


# --- archiving and deleting ---


def archive_team(team, *, by, reason="Team archived"):
    """Revoke the team's quota and cap it at zero; the namespace and its data stay."""
    if not quota_actions.can_review(by):
        raise quota_actions.NotAllowed("Only platform admins can archive teams.")
    with transaction.atomic():
        _ensure_row(team.pk)
        updated = TeamSync.objects.filter(team_id=team.pk, archived_at__isnull=True).update(
            archived_at=timezone.now()
        )
        if not updated:
            raise quota_actions.IllegalTransition(f"{team.name} is already archived.")
        for quota_request in QuotaRequest.objects.reserving().filter(team=team):
            quota_actions.revoke(quota_request, by=by, reason=reason)
        AuditEvent.objects.create(team=team, actor=by, action="archive", reason=reason)
        team_changed(team.pk)


def delete_namespace(team, *, by, cluster=None):
    """Delete an archived team's namespace (and everything in it). One API call."""
    if not quota_actions.can_review(by):
        raise quota_actions.NotAllowed("Only platform admins can delete namespaces.")
    sync = TeamSync.objects.filter(team=team).first()
    if sync is None or sync.archived_at is None:
        raise quota_actions.IllegalTransition("Archive the team before deleting its namespace.")
    if sync.namespace_deleted_at is not None:
        raise quota_actions.IllegalTransition("The namespace is already deleted.")
    namespace = desired_state(team.pk).namespace
    # Mark first, so no sync recreates what we are about to delete.
    TeamSync.objects.filter(team=team).update(namespace_deleted_at=timezone.now(), applied={})
    try:
        (cluster or kube.cluster()).delete("Namespace", namespace)
    except kube.ClusterError:
        TeamSync.objects.filter(team=team).update(namespace_deleted_at=None)
        raise
    AuditEvent.objects.create(
        team=team, actor=by, action="delete_namespace", reason=f"Namespace {namespace} deleted"
    )
    return namespace


# --- inventory ---


def _is_ready(node):
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _to_int(quantity):
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def _pod_requests(pod):
    totals = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in asked.items():
            totals[name] = totals.get(name, 0) + _to_int(quantity)
    return totals


def record_inventory(cluster=None, now=None):
    """Read Nodes and Pods; record GPU nodes and each flavor's devices and allocation.

    The devices become the flavor's capacity for approvals (Flavor.capacity), so
    the approval check counts what the cluster has, at no extra query.

    Two LISTs (plus one per further page of 500). A flavor's devices are the
    allocatable of its resource name on schedulable, Ready nodes matching its
    node selector; allocated is what pods bound to those nodes ask for.
    """
    cluster = cluster or kube.cluster()
    now = now or timezone.now()
    nodes = cluster.list("Node")
    pods = cluster.list("Pod")
    held = {}  # node name -> {resource: devices held}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        bucket = held.setdefault(node_name, {})
        for name, count in _pod_requests(pod).items():
            bucket[name] = bucket.get(name, 0) + count

    gpu_nodes = []
    for node in nodes:
        allocatable = {
            name: _to_int(value)
            for name, value in ((node.get("status") or {}).get("allocatable") or {}).items()
            if name.startswith("nvidia.com/") or ".deviceclass." in name
        }
        if not any(allocatable.values()):
            continue
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        gpu_nodes.append(
            GpuNode(
                name=meta["name"],
                pool=labels.get("kubesim.io/pool")
                or labels.get("karpenter.sh/nodepool")
                or labels.get("cloud.google.com/gke-nodepool")
                or labels.get("kubernetes.azure.com/agentpool")
                or labels.get("eks.amazonaws.com/nodegroup", ""),
                gpu_model=labels.get("nvidia.com/gpu.product", ""),
                allocatable=allocatable,
                allocated={k: v for k, v in held.get(meta["name"], {}).items() if k in allocatable},
                taints=(node.get("spec") or {}).get("taints") or [],
                cordoned=bool((node.get("spec") or {}).get("unschedulable")),
                ready=_is_ready(node),
                observed_at=now,
            )
        )
        gpu_nodes[-1].labels = labels

    with transaction.atomic():
        GpuNode.objects.all().delete()
        GpuNode.objects.bulk_create(gpu_nodes)
        for flavor in Flavor.objects.all():
            devices = allocated = 0
            for node in gpu_nodes:
                selector = flavor.node_selector or {}
                if not all(node.labels.get(k) == v for k, v in selector.items()):
                    continue
                if flavor.resource_name not in node.allocatable:
                    continue
                allocated += node.allocated.get(flavor.resource_name, 0)
                if node.ready and not node.cordoned:
                    devices += node.allocatable[flavor.resource_name]
            inventory, _ = FlavorCapacity.objects.update_or_create(
                flavor=flavor,
                defaults={"devices": devices, "allocated": allocated, "observed_at": now},
            )
            # Flavor.capacity is what approvals check: the cluster's count from
            # now on, unless an admin pinned another.
            capacity = devices if inventory.override is None else inventory.override
            Flavor.objects.filter(pk=flavor.pk).update(capacity=capacity)
    return len(gpu_nodes)


def set_capacity_override(flavor, override, *, by):
    """Pin a flavor's capacity (None: follow the inventory again)."""
    if not quota_actions.can_review(by):
        raise quota_actions.NotAllowed("Only platform admins can set capacity.")
    with transaction.atomic():
        inventory, _ = FlavorCapacity.objects.get_or_create(flavor=flavor)
        inventory.override = override
        inventory.save(update_fields=["override"])
        capacity = override if override is not None else inventory.devices
        if capacity is not None:
            Flavor.objects.filter(pk=flavor.pk).update(capacity=capacity)
