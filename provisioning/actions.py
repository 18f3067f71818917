"""Make the cluster match the database, team by team.

The database is the desired state (provisioning.desired); `sync_team` makes
the cluster match it with server-side apply under one field manager, writing
only the objects that differ. Work goes through the outbox (cluster.outbox):
marked in the database first and queued on commit, so a lost message or a
dead worker only delays it until the next sweep.
"""

import logging
from contextlib import nullcontext

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from cluster import kube
from cluster.outbox import Outbox
from provisioning.desired import desired_state, desired_states, digest, object_hash, object_key
from provisioning.models import ProvisioningAction, TeamSync
from teams import access, errors, namespaces
from teams.models import AuditEvent

log = logging.getLogger(__name__)

Status = TeamSync.Status
Action = ProvisioningAction
MANAGED_SELECTOR = f"{namespaces.MANAGED_BY_LABEL}={namespaces.MANAGED_BY}"


class NotTheTeamsNamespace(kube.PermanentClusterError):
    """The team's namespace is one the portal may not take as the team's
    (`teams.namespaces.refusal`): a system namespace, the portal's own, or one that
    exists without the labels the portal gives the namespace it makes for the team.
    Raised before anything is written to it; retrying changes nothing."""

    def __init__(self, message):
        super().__init__(0, message)


team_sync = Outbox(
    TeamSync,
    key="team_id",
    task="provisioning.tasks.sync_team",
    lease=lambda: settings.PORTAL_SYNC_LEASE,
    batch_task="provisioning.tasks.sync_teams",
    batch_size=lambda: settings.PORTAL_SYNC_BATCH,
)


# --- marking and queueing ---


def mark_dirty(team_id):
    """Record that the team's desired state changed (one query; three the first time)."""
    team_sync.mark(team_id, status=_failing_stays_failing())


def _failing_stays_failing():
    # A failing team stays failing (its error stays visible) until a sync succeeds.
    return Case(
        When(status=Status.FAILING, then=Value(Status.FAILING)), default=Value(Status.PENDING)
    )


def enqueue(team_ids):
    """Queue syncs; a broker outage is logged, not raised (the sweep retries)."""
    return team_sync.enqueue(team_ids)


def team_changed(team_id):
    """A team's quota, membership or state changed: mark it and queue a sync on commit.
    No savepoint: a failed mark fails the caller's change, as a callback should."""
    with transaction.atomic(savepoint=False):
        mark_dirty(team_id)
        transaction.on_commit(lambda: enqueue([team_id]))


def teams_changed(team_ids):
    """`team_changed` for several teams at once (the lifecycle sweep): two queries."""
    team_ids = list(team_ids)
    with transaction.atomic():
        team_sync.mark_many(team_ids, status=_failing_stays_failing())
        transaction.on_commit(lambda: enqueue(team_ids))


def members_changed(team_id):
    """Members matter to the cluster only for a team that is on it (users mode
    binds them by name); a team not on it gets them with its first quota. One query."""
    if TeamSync.objects.filter(team_id=team_id, namespace_deleted_at__isnull=True).exists():
        team_changed(team_id)


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


def _terminating(live):
    return live is not None and bool(live["metadata"].get("deletionTimestamp"))


def _refuse_unless_ours(obj, live):
    """`obj` is the team's Namespace as the portal wants it, `live` the one on the
    cluster (None: none, it will be created). Raise NotTheTeamsNamespace unless
    the portal may write it: no apply may label, and so take over, a namespace
    the portal did not make for the team."""
    name, slug = obj["metadata"]["name"], obj["metadata"]["labels"][namespaces.TEAM_LABEL]
    problem = namespaces.refusal(slug, live, name=name)
    if problem:
        raise NotTheTeamsNamespace(problem)


def namespace_refusal(slug, name):
    """Why a new team `slug` may not have namespace `name` ("" if it may), by the
    namespace on the cluster (`hooks.on_namespace_refusal`): one GET. A cluster
    that does not answer stops nothing here; the team's first sync reads the
    namespace again before it writes (`reconcile`) and refuses it then."""
    try:
        live = kube.cluster().get("Namespace", name)
    except kube.ClusterError as exc:
        log.warning("namespace %s not checked before team %s was made: %s", name, slug, exc)
        return ""
    return namespaces.refusal(slug, live, name=name)


def _describe_drift(obj, live):
    name = f"{obj['kind']} {obj['metadata']['name']}"
    if live is None:
        return f"{name} was deleted outside the portal; recreated."
    if obj["kind"] == "ResourceQuota":
        want = obj["spec"]["hard"]
        have = (live.get("spec") or {}).get("hard") or {}
        want = {**want, **obj["metadata"].get("annotations", {})}
        have = {**have, **(live["metadata"].get("annotations") or {})}
        changes = ", ".join(
            f"{key}: {have.get(key, 'unset')} -> {value}"
            for key, value in want.items()
            if have.get(key) != value
        )
        return f"{name} was changed outside the portal ({changes}); restored."
    return f"{name} was changed outside the portal; restored."


def reconcile(cluster, objects, applied, *, read=False):
    """Apply the objects that differ from what they should be. Returns (applied
    hashes, writes, drift descriptions).

    Without `read`, what was applied last (`applied`: a hash per object) is the
    reference: an object whose hash is unchanged is neither read nor written, one
    that changed is applied unread (server-side apply needs no read first). A
    team never synced has nothing to compare with, so all of its objects are
    applied. What someone else changed on the cluster is `check_drift`'s to find;
    it has the team's next sync `read`: one GET per object (none after a missing
    namespace: nothing can be in it), one apply per object that differs, and a
    description of each difference from what was applied last.

    The Namespace is never applied unread: before its first apply (and whenever
    its name or labels change) it is read, one GET, and a namespace that exists
    without being the team's (`teams.namespaces.refusal`: no labels of the
    portal's for the team, or a system namespace, checked without a call) stops
    the sync before anything is written: NotTheTeamsNamespace.
    """
    new_applied, writes, drift = {}, 0, []
    namespace_missing = not applied
    for obj in objects:
        if not cluster.serves(obj["kind"]):
            continue  # admission policies on a server without them: docs/security.md
        key, wanted = object_key(obj), object_hash(obj)
        meta = obj["metadata"]
        is_namespace = obj["kind"] == "Namespace"
        if is_namespace:
            # Whatever the row says was applied: no call at all for a namespace that
            # is never a team's (kube-system, default, the portal's own).
            _refuse_unless_ours(obj, None)
        if read and not namespace_missing:
            live = cluster.get(obj["kind"], meta["name"], meta.get("namespace"))
            namespace_missing = is_namespace and live is None
            if is_namespace:
                # Its labels taken off since, or the namespace made again by someone
                # else: no longer the team's, so it is not labelled back.
                _refuse_unless_ours(obj, live)
            if is_namespace and _terminating(live):
                # Deleted outside the portal: it cannot be applied to until the namespace
                # controller has emptied it and it is gone. Try again then.
                raise kube.TransientClusterError(
                    f"namespace {meta['name']} is being terminated; it is made again once gone"
                )
            if live is not None and matches(obj, live):
                new_applied[key] = wanted
                continue
            if applied.get(key) == wanted:
                drift.append(_describe_drift(obj, live))
        elif not namespace_missing and applied.get(key) == wanted:
            new_applied[key] = wanted
            continue
        elif is_namespace:
            # About to apply the Namespace unread (the team's first sync, or its name
            # or labels changed): read it first, one GET, so that the apply never
            # takes over a namespace that exists without being the team's.
            live = cluster.get("Namespace", meta["name"])
            _refuse_unless_ours(obj, live)
            if _terminating(live):
                raise kube.TransientClusterError(
                    f"namespace {meta['name']} is being terminated; it is made again once gone"
                )
        cluster.apply(obj, field_manager=settings.PORTAL_KUBE_FIELD_MANAGER)
        writes += 1
        new_applied[key] = wanted
    writes += _prune(cluster, objects, applied)
    return new_applied, writes, drift


def _prune(cluster, objects, applied):
    """Delete what was applied for the team and is no longer wanted (the budget's
    quota once the hold lifts): one DELETE each (a 404 is fine). Nothing while the
    team has no objects: its namespace is deleted, and everything in it goes with it."""
    wanted = {object_key(obj) for obj in objects}
    namespace = next(
        (o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]), None
    )
    deleted = 0
    for key in sorted(set(applied) - wanted):
        kind, _, name = key.partition("/")
        if namespace is None or kind not in kube.KINDS:
            continue
        cluster.delete(kind, name, namespace if kube.KINDS[kind][2] else None)
        deleted += 1
    return deleted


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
    team_sync.holding(team_id, token).update(**fields)
    if permanent and message != previous:
        refused_by = "Not synced" if isinstance(exc, NotTheTeamsNamespace) else "Cluster refused"
        AuditEvent.record(
            team_id=team_id, action=Action.SYNC_FAILED, reason=f"{refused_by}: {message}"
        )


def _pending(force):
    """What a claim requires: work to do (marked since synced, or not in sync),
    unless `force`."""
    return None if force else team_sync.newer_generation() | ~Q(status=Status.IN_SYNC)


# What a successful sync clears, whatever the team.
CLEARED = {"last_error": "", "last_error_status": None, "last_error_at": None}


def _reconcile_team(cluster, row, state, *, force=False):
    """Apply the team's changed objects: (writes, drift descriptions, the
    team's own fields to record once it is finished)."""
    objects = state.objects()
    read = force or row.drifted
    applied, writes, drift = reconcile(cluster, objects, row.applied, read=read)
    own = {"applied": applied, "synced_digest": digest(objects, applied)}
    if read:
        own["drifted"] = False
    return writes, drift, own


def _record_drift(team_id, drift):
    for description in drift:
        AuditEvent.record(team_id=team_id, action=Action.DRIFT_REPAIRED, reason=description)


def _left_pending(team_id, token, generation, own):
    """Marked again while it synced: keep what was applied, stay pending (still held)."""
    team_sync.holding(team_id, token).update(
        **own, **CLEARED, synced_generation=generation, status=Status.PENDING
    )


def sync_team(team_id, *, cluster=None, force=False):
    """Make the cluster match the team's desired state. Idempotent.

    Four queries and one apply per object whose desired state changed since it
    was last applied, with no reads (`reconcile`); after `check_drift` found the
    team's live objects changed, or with `force`, one GET per object as well. A
    team already in sync is skipped after one query, with no API calls, unless
    `force`. Returns the number of writes, or None if it did nothing (in sync, or
    held by another worker). Raises TransientClusterError (retry later) or
    PermanentClusterError (don't), both recorded on the team first.
    """
    now = timezone.now()
    token = team_sync.claim(team_id, now, pending=_pending(force))
    if token is None:
        if TeamSync.objects.filter(team_id=team_id).exists():
            return None
        team_sync.ensure(team_id)
        token = team_sync.claim(team_id, now, pending=_pending(force))
        if token is None:
            return None
    writes = 0
    row = None
    finished = False
    try:
        cluster = cluster or kube.cluster()
        # A change that lands while we sync bumps the generation: go round again.
        for _ in range(3):
            row = TeamSync.objects.select_related("team").get(team_id=team_id)
            state = desired_state(team_id, row=row)
            count, drift, own = _reconcile_team(cluster, row, state, force=force)
            writes += count
            # BEGIN and COMMIT are two more round trips: only drift needs them,
            # to record the repair together with the sync.
            with transaction.atomic() if drift else nullcontext():
                _record_drift(team_id, drift)
                done = timezone.now()
                finished = team_sync.finish(
                    team_id, token, row.generation, **own, **CLEARED,
                    last_synced_at=done, last_checked_at=done, status=Status.IN_SYNC,
                )  # fmt: skip
                if not finished:
                    _left_pending(team_id, token, row.generation, own)
            if finished:
                break
    except kube.ClusterError as exc:
        _record_error(team_id, token, row and row.generation, exc)
        raise
    finally:
        if not finished:
            team_sync.release(team_id, token)
    return writes


def sync_teams(team_ids, *, cluster=None):
    """`sync_team` for a batch of teams (the sweep's catch-up, `team_sync.enqueue`):
    one claim and the desired states in four queries for the whole batch, one
    apply per changed object, and one UPDATE to finish them all. Teams held
    elsewhere or in sync are skipped. Returns {team_id: writes, or the
    ClusterError it raised (recorded on the team)}; a team marked again
    meanwhile is left pending and returned as None, for the caller to queue.
    """
    token = team_sync.claim_many(team_ids, pending=_pending(False))
    rows = list(TeamSync.objects.filter(team_id__in=team_ids, claim_token=token))
    if not rows:
        return {}
    states = desired_states([row.team_id for row in rows])
    cluster = cluster or kube.cluster()
    results, synced = {}, {}
    for row in rows:
        try:
            writes, drift, own = _reconcile_team(cluster, row, states[row.team_id])
        except kube.ClusterError as exc:
            _record_error(row.team_id, token, row.generation, exc)
            team_sync.release(row.team_id, token)
            results[row.team_id] = exc
            continue
        _record_drift(row.team_id, drift)  # repaired on the cluster, whatever follows
        results[row.team_id], synced[row.team_id] = writes, (row.generation, own)
    done = timezone.now()
    finished = team_sync.finish_each(
        synced, token, **CLEARED, last_synced_at=done, last_checked_at=done,
        status=Status.IN_SYNC,
    )  # fmt: skip
    for team_id in synced.keys() - finished:
        generation, own = synced[team_id]
        _left_pending(team_id, token, generation, own)
        team_sync.release(team_id, token)
        results[team_id] = None
    return results


# --- all teams ---


def sweep(now=None):
    """Queue a sync for every team that needs one. A few queries, no API calls.

    A team needs one when it was marked and not synced (and nobody holds it, or
    its holder died), or when its desired state no longer has the digest last
    synced (a change nobody marked, such as a new member).
    """
    now = now or timezone.now()
    rows = TeamSync.objects.filter(namespace_deleted_at__isnull=True)
    # A team marked already is synced anyway: only the others' digests are compared.
    unmarked = rows.filter(generation__lte=F("synced_generation"))
    synced = dict(unmarked.values_list("team_id", "synced_digest"))
    changed = [
        team_id
        for team_id, state in desired_states(list(synced)).items()
        if state.digest() != synced[team_id]
    ]
    for team_id in unmarked.filter(team_id__in=changed).values_list("team_id", flat=True):
        mark_dirty(team_id)
    return enqueue(team_sync.due(rows, now))


def check_drift(cluster=None):
    """Compare every in-sync team's objects with the live ones; queue the teams that differ.

    One LIST per kind for the whole cluster (paged by 500), whatever the number
    of teams; the syncs queued then read the teams' objects, repair and record
    what they find (`TeamSync.drifted`).
    """
    cluster = cluster or kube.cluster()
    rows = TeamSync.objects.filter(namespace_deleted_at__isnull=True, status=Status.IN_SYNC)
    states = desired_states(list(rows.values_list("team_id", flat=True)))
    wanted = {team_id: state.objects() for team_id, state in states.items()}
    # The kinds the manifest builders made: a new one is compared as soon as it is built.
    kinds = dict.fromkeys(obj["kind"] for objects in wanted.values() for obj in objects)
    kinds = [kind for kind in kinds if cluster.serves(kind)]
    live = {}
    for kind in kinds:
        for item in cluster.list(kind, label_selector=MANAGED_SELECTOR):
            meta = item["metadata"]
            live[(kind, meta.get("namespace"), meta["name"])] = item
    drifted = []
    for team_id, objects in wanted.items():
        for obj in objects:
            if obj["kind"] not in kinds:
                continue
            meta = obj["metadata"]
            found = live.get((obj["kind"], meta.get("namespace"), meta["name"]))
            # A list's items carry no apiVersion and kind (the list does): compare the rest.
            listed = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
            if found is None or not matches(listed, found) or _terminating(found):
                drifted.append(team_id)
                break
    TeamSync.objects.filter(team_id__in=states).exclude(team_id__in=drifted).update(
        last_checked_at=timezone.now()
    )
    TeamSync.objects.filter(team_id__in=drifted).update(drifted=True)
    for team_id in drifted:
        mark_dirty(team_id)
    enqueue(drifted)
    return drifted


# --- deleting ---


def delete_namespace(team, *, by, cluster=None):
    """Delete an archived team's namespace (and everything in it), if it is the
    team's: read first, refused unless it carries the labels the portal gave it for
    the team (`teams.namespaces.refusal`), then deleted on condition that it is
    still that namespace unchanged (preconditions: a namespace relabelled or made
    again meanwhile is not deleted). Two API calls."""
    if not access.can_review(by):
        raise errors.NotAllowed("Only platform admins can delete namespaces.")
    sync = TeamSync.objects.filter(team=team).first()
    if not team.is_archived or sync is None:
        raise errors.IllegalTransition("Archive the team before deleting its namespace.")
    if sync.namespace_deleted_at is not None:
        raise errors.IllegalTransition("The namespace is already deleted.")
    namespace = desired_state(team.pk).namespace
    if problem := namespaces.reserved(namespace):
        raise errors.IllegalTransition(f"Namespace {namespace} is not deleted: {problem}.")
    cluster = cluster or kube.cluster()
    live = cluster.get("Namespace", namespace)
    if live is not None and (problem := namespaces.refusal(team.slug, live, name=namespace)):
        raise errors.IllegalTransition(f"{problem} It is not deleted.")
    # Mark first, so no sync recreates what we are about to delete.
    TeamSync.objects.filter(team=team).update(namespace_deleted_at=timezone.now(), applied={})
    try:
        if live is not None:
            meta = live["metadata"]
            cluster.delete(
                "Namespace",
                namespace,
                preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            )
    except kube.ClusterError as exc:
        TeamSync.objects.filter(team=team).update(namespace_deleted_at=None)
        if exc.status == 409:
            raise errors.IllegalTransition(
                f"Namespace {namespace} changed while it was being deleted; it is not deleted. "
                "Look at it, then try again."
            ) from None
        raise
    AuditEvent.record(
        team_id=team.pk,
        actor=by,
        action=Action.DELETE_NAMESPACE,
        reason=f"Namespace {namespace} deleted",
    )
    return namespace
