"""The simulated control plane: admission hooks plus one background loop that runs
the quota controller, job controller, scheduler and kubelet against the store.

The loop ticks every TICK seconds of real time (sooner when the store changes) and
judges every deadline by the sim clock, so `POST /_sim/clock {"advance": ...}` moves
work along without real waiting. Decisions live in pure modules (quota, jobs,
scheduler, kubelet, dcgm); this module only reads the store and writes the results.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from kubesim import cluster
from kubesim.apiserver import quota
from kubesim.apiserver.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
)
from kubesim.apiserver.resources import APPS, RESOURCES, omit_zero_job_counts
from kubesim.clock import format_time, parse_time
from kubesim.cluster import DEFAULT_CLUSTER
from kubesim.controllers import jobs, scheduler, workloads, xid
from kubesim.controllers import nodes as lifecycle
from kubesim.exporters import dcgm, ksm
from kubesim.exporters.exposition import TEXT_CONTENT_TYPE
from kubesim.kubelet import runtime

log = logging.getLogger(__name__)

MANAGER = "kube-controller-manager"  # the field manager of the controllers' own writes
TICK = 0.1  # seconds of real time between syncs
FULL_RESYNC = 2.0  # real seconds between full scheduler retries of pending pods
CREATE_BACKOFF = (0.5, 10.0)  # real seconds: first and longest wait after a FailedCreate


RECLAIM_MODES = ("eviction", "shutdown")
DEFAULT_RECLAIM_GRACE = 120  # seconds: the notice an AWS spot interruption gives
DEFAULT_REPLACEMENT_AFTER = 300  # seconds until a random reclaim's replacement joins


@dataclass
class Reclaim:
    """A spot node on notice: at `deadline` it is gone (and maybe replaced later)."""

    mode: str
    deadline: datetime
    returns_after: float | None
    node: dict


def install(sim, cluster_path: str | Path | None = None) -> ControlPlane:
    """Load the cluster's nodes into `sim.store` and hook the control plane into `sim`."""
    plane = ControlPlane(sim.store)
    plane.load_cluster(cluster_path or DEFAULT_CLUSTER)
    plane.install_admission()
    sim.store.namespace_lifecycle = True
    sim.controllers.append(plane)
    sim.metrics_provider = plane.metrics
    sim.metrics_pages = plane.metrics_page
    sim.control_plane = plane
    return plane


class ControlPlane:
    def __init__(self, store):
        self.store = store
        self.clock = store.clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dirty_namespaces: set[str] = set()
        self._schedule_all = True
        self._last_full_schedule = 0.0
        self._create_backoff: dict[str, tuple[float, float]] = {}  # job uid -> (until, wait)
        self._failure_backoff: dict[str, jobs.FailureBackoff] = {}  # job uid -> its record
        # Namespaces where a quota changed or a pod ended: blocked Jobs retry at once.
        self._room_namespaces: set[str] = set()
        self._events: dict[tuple, str] = {}  # (uid, type, reason, message) -> event name
        self._event_ids = itertools.count(1)
        self._random = random.Random()
        self._reclaims: dict[str, Reclaim] = {}  # node name -> its pending reclaim
        # (when, pod uid, namespace, name, gpu, XID, resource): pods an XID crashes later.
        self._xid_crashes: list[tuple] = []
        self._joins: list[tuple[datetime, dict]] = []  # (when, reclaimed node) replacements
        self._spot_pools: dict[str, dict] = {}  # pool name -> pool with reclaimRatePerHour
        self._next_reclaim: dict[str, datetime | None] = {}
        self._next_reclaim_pool: dict[str, str] = {}
        self._gone: set[str] = set()  # names of reclaimed nodes, never reused
        self._reclaim_history: list[dict] = []
        self._started = self.clock.now()  # random reclaims count from here
        self.energy = dcgm.EnergyMeter()
        # --metric-labels-allowlist of the simulated kube-state-metrics.
        self.ksm_allowlist = ksm.DEFAULT_ALLOWLIST
        self._file_sd: tuple[str, str] | None = None  # (path, address) to keep current
        self._file_sd_dirty = False
        store.subscribe(self._on_change)

    # --- lifecycle ---

    def start(self) -> None:
        if self._thread:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kubesim-control", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(TICK)
            self._wake.clear()
            try:
                self.sync()
            except Exception:  # a bug in one sync must not kill the control plane
                log.exception("kubesim control loop failed")
            time.sleep(0.01)  # our own writes wake us; don't spin on them

    def _on_change(self, event_type: str, resource: str, obj: dict) -> None:
        # Runs inside the store lock: only note what changed.
        namespace = obj["metadata"].get("namespace")
        if resource in ("pods", "resourcequotas", "jobs") and namespace:
            self._dirty_namespaces.add(namespace)
        frees = resource == "pods" and _frees_resources(event_type, obj)
        if resource == "nodes" or frees:
            self._schedule_all = True
        if resource == "nodes" and self._file_sd:
            self._file_sd_dirty = True
        if namespace and (frees or resource == "resourcequotas"):
            self._room_namespaces.add(namespace)
        if resource in ("pods", "jobs", "nodes", *APPS):
            self._wake.set()

    # --- setup ---

    def load_cluster(self, path: str | Path) -> None:
        data = cluster.load(path)
        for node in cluster.build_nodes(data):
            with contextlib.suppress(AlreadyExists):
                self.store.create("nodes", None, node)
        self._spot_pools = {
            pool["name"]: pool for pool in data["nodePools"] if pool.get("reclaimRatePerHour")
        }

    def install_admission(self) -> None:
        self.store.add_admission("pods", self._admit_pod)
        self.store.add_admission("jobs", self._admit_job)
        self.store.add_admission("limitranges", self._admit_limit_range)
        self.store.add_admission("resourcequotas", self._admit_quota)

    # --- admission (inside the store lock) ---

    def _admit_pod(self, operation, pod, old, store) -> None:
        if operation != "CREATE":
            return
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        limit_ranges, _ = store.list_refs("limitranges", namespace)
        problem = quota.apply_limit_ranges(pod, limit_ranges)
        if problem:
            raise Forbidden(resource="pods", name=name, message=problem)
        quotas, _ = store.list_refs("resourcequotas", namespace)
        if not quotas:
            return
        pods, _ = store.list_refs("pods", namespace)
        problem = quota.check_pod(pod, quotas, pods)
        if problem:
            raise Forbidden(resource="pods", name=name, message=problem)

    def _admit_job(self, operation, job, old, store) -> None:
        if operation != "CREATE":
            return
        namespace = job["metadata"]["namespace"]
        quotas, _ = store.list_refs("resourcequotas", namespace)
        if any("count/jobs.batch" in (q.get("spec") or {}).get("hard", {}) for q in quotas):
            existing, _ = store.list_refs("jobs", namespace)
            problem = quota.check_job_count(len(existing), quotas)
            if problem:
                raise Forbidden(
                    resource="jobs", group="batch", name=job["metadata"]["name"], message=problem
                )

    def _admit_limit_range(self, operation, limit_range, old, store) -> None:
        quota.default_limit_range(limit_range)

    def _admit_quota(self, operation, resource_quota, old, store) -> None:
        # Fill status at once (the real controller does so within a moment), so a
        # client reading the quota right after creating it sees hard and used.
        namespace = resource_quota["metadata"]["namespace"]
        resource_quota["status"] = self._quota_status(store, namespace, resource_quota)

    def _quota_status(self, store, namespace: str, resource_quota: dict) -> dict:
        hard = dict((resource_quota.get("spec") or {}).get("hard") or {})
        pods, _ = store.list_refs("pods", namespace)
        job_count = 0
        if "count/jobs.batch" in hard:
            job_count = len(store.list_refs("jobs", namespace)[0])
        return {"hard": hard, "used": quota.used_status(hard, quota.total_usage(pods), job_count)}

    # --- the loop ---

    def sync(self) -> None:
        """One pass of every controller."""
        if self._file_sd_dirty:
            self._file_sd_dirty = False
            self._write_file_sd()
        self.sync_namespaces()
        self.sync_quotas()
        pods, _ = self.store.list_refs("pods")
        self.sync_nodes(pods)
        pods, _ = self.store.list_refs("pods")
        self.sync_jobs(pods)
        self.sync_apps()
        pods, _ = self.store.list_refs("pods")
        self.sync_scheduler(pods)
        pods, _ = self.store.list_refs("pods")
        self.sync_kubelet(pods)

    def sync_namespaces(self) -> None:
        """The namespace controller: empty each Terminating namespace (pods get their
        grace period), then let it go."""
        for namespace in self.store.terminating_namespaces():
            for rtype in RESOURCES.values():
                if not rtype.namespaced:
                    continue
                for obj in self.store.list(rtype.plural, namespace):
                    if not obj["metadata"].get("deletionTimestamp"):
                        with contextlib.suppress(NotFound):
                            self.store.delete(
                                rtype.plural, namespace, obj["metadata"]["name"],
                                propagation_policy="Background",
                            )  # fmt: skip
            self.store.finish_namespace(namespace)

    def sync_quotas(self) -> None:
        """Recompute status.used only for namespaces whose pods, jobs or quotas changed."""
        with self.store.lock:
            dirty, self._dirty_namespaces = self._dirty_namespaces, set()
        for namespace in dirty:
            quotas, _ = self.store.list_refs("resourcequotas", namespace)
            for resource_quota in quotas:
                status = self._quota_status(self.store, namespace, resource_quota)
                if status != resource_quota.get("status"):
                    updated = {**resource_quota, "status": status}
                    self._write_status("resourcequotas", updated)

    def sync_jobs(self, pods: list[dict]) -> None:
        jobs_list, _ = self.store.list_refs("jobs")
        by_owner: dict[str, list[dict]] = {}
        for pod in pods:
            for ref in pod["metadata"].get("ownerReferences") or ():
                if ref.get("controller") and ref.get("kind") == "Job":
                    by_owner.setdefault(ref["uid"], []).append(pod)
        known = {job["metadata"]["uid"] for job in jobs_list}
        for uid in set(self._failure_backoff) - known:
            del self._failure_backoff[uid]  # the Job is gone
        for pod in pods:
            if jobs.tracked(pod) and not any(r.get("uid") in known for r in _owners(pod)):
                # The Job is gone: nobody will count the pod, let it go.
                self._untrack(pod["metadata"]["namespace"], pod["metadata"]["name"])
        if not jobs_list:
            return
        now = self.clock.now()
        with self.store.lock:
            room, self._room_namespaces = self._room_namespaces, set()
        for job in jobs_list:
            if job["metadata"]["namespace"] in room:
                self._create_backoff.pop(job["metadata"]["uid"], None)
            try:
                self._sync_job(job, by_owner.get(job["metadata"]["uid"], []), now)
            except ApiError as error:
                log.debug("job sync of %s: %s", job["metadata"]["name"], error)

    def _sync_job(self, job: dict, pods: list[dict], now) -> None:
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        backoff = self._failure_backoff.get(meta["uid"]) or jobs.FailureBackoff()
        actions = jobs.reconcile(job, pods, now, backoff)
        if actions.delete_job:
            # TTL ran out: the job and its pods go (the TTL controller deletes in background).
            self._ignore_missing(
                self.store.delete, "jobs", namespace, name, propagation_policy="Background"
            )
            self._create_backoff.pop(meta["uid"], None)
            return
        for pod_name in actions.delete:
            # Pods the controller deletes itself never count as failed.
            self._untrack(namespace, pod_name)
            self._ignore_missing(self.store.delete, "pods", namespace, pod_name)
            self.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
        for kind, reason, message in actions.events:
            self.event(job, kind, reason, message)
        if actions.backoff.failures and not jobs.is_finished({"status": actions.status}):
            self._failure_backoff[meta["uid"]] = actions.backoff
        else:
            self._failure_backoff.pop(meta["uid"], None)
        if actions.create:
            actions.status["active"] += self._create_pods(job, actions.create)
        if omit_zero_job_counts(actions.status) != (job.get("status") or {}):
            self._write_status("jobs", {**job, "status": actions.status})
        # Counted in the status just written: now the pods may go.
        for pod_name in actions.untrack:
            self._untrack(namespace, pod_name)

    def _untrack(self, namespace: str, name: str) -> None:
        """Remove the job-tracking finalizer (a deleted pod then disappears)."""
        with self.store.lock:
            try:
                pod = self.store.get_ref("pods", namespace, name)
            except NotFound:
                return
            finalizers = pod["metadata"].get("finalizers") or []
            if jobs.TRACKING_FINALIZER not in finalizers:
                return
            meta = {**pod["metadata"]}
            meta["finalizers"] = [f for f in finalizers if f != jobs.TRACKING_FINALIZER]
            if not meta["finalizers"]:
                del meta["finalizers"]
            self.store.update("pods", namespace, {**pod, "metadata": meta})

    def _create_pods(self, job: dict, count: int) -> int:
        """Create up to `count` pods; stop at the first refusal (e.g. quota), record it
        as a FailedCreate event and back off before trying again."""
        uid = job["metadata"]["uid"]
        until, wait = self._create_backoff.get(uid, (0.0, 0.0))
        if time.monotonic() < until:
            return 0
        created = 0
        for _ in range(count):
            pod = jobs.pod_from_template(job, jobs.pod_name(job["metadata"]["name"], self._random))
            try:
                self.store.create("pods", job["metadata"]["namespace"], pod)
            except AlreadyExists:
                continue  # name clash of the random suffix: next sync retries
            except ApiError as error:
                self.event(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
                low, high = CREATE_BACKOFF
                wait = min(high, wait * 2) if wait else low
                self._create_backoff[uid] = (time.monotonic() + wait, wait)
                return created
            created += 1
            self.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        self._create_backoff.pop(uid, None)
        return created

    # --- apps/v1: Deployment -> ReplicaSet -> pods, StatefulSet -> pods (controllers/workloads.py)

    def sync_apps(self) -> None:
        for deployment in self.store.list_refs("deployments")[0]:
            self._each(self._sync_deployment, deployment)
        pods, _ = self.store.list_refs("pods")
        for rs in self.store.list_refs("replicasets")[0]:
            self._each(self._sync_replica_set, rs, pods)
        for sts in self.store.list_refs("statefulsets")[0]:
            self._each(self._sync_stateful_set, sts, pods)
        # The ReplicaSets' new statuses roll up into their Deployments'.
        for deployment in self.store.list_refs("deployments")[0]:
            self._each(self._deployment_status, deployment)

    def _each(self, sync, obj: dict, *args) -> None:
        if obj["metadata"].get("deletionTimestamp"):
            return
        try:
            sync(obj, *args)
        except ApiError as error:
            log.debug("%s sync of %s: %s", obj["kind"], obj["metadata"]["name"], error)

    def _owned_replica_sets(self, deployment: dict) -> list[dict]:
        namespace = deployment["metadata"]["namespace"]
        return [
            rs
            for rs in self.store.list_refs("replicasets", namespace)[0]
            if workloads.controlled_by(rs, deployment)
        ]

    def _sync_deployment(self, deployment: dict) -> None:
        namespace = deployment["metadata"]["namespace"]
        owned = self._owned_replica_sets(deployment)
        new = workloads.current_replica_set(deployment, owned)
        if new is None:
            revision = 1 + max(
                (int(_annotation(rs, workloads.REVISION) or 0) for rs in owned), default=0
            )
            collisions = (deployment.get("status") or {}).get("collisionCount", 0)
            hash_ = workloads.template_hash(deployment["spec"]["template"], collisions)
            wanted = workloads.new_replica_set(deployment, hash_, revision)
            new = self.store.create("replicasets", namespace, wanted, field_manager=MANAGER)
            if new["spec"]["replicas"]:
                self._scaled_event(deployment, new, 0)
        if _annotation(deployment, workloads.REVISION) != _annotation(new, workloads.REVISION):
            annotations = {**(deployment["metadata"].get("annotations") or {})}
            annotations[workloads.REVISION] = _annotation(new, workloads.REVISION)
            meta = {**deployment["metadata"], "annotations": annotations}
            updated = {**deployment, "metadata": meta}
            self.store.update("deployments", namespace, updated, field_manager=MANAGER)
        for rs in owned + ([new] if new not in owned else []):
            is_new = rs["metadata"]["uid"] == new["metadata"]["uid"]
            self._scale_replica_set(deployment, rs, deployment["spec"]["replicas"] if is_new else 0)

    def _scale_replica_set(self, deployment: dict, rs: dict, replicas: int) -> None:
        before = rs["spec"]["replicas"]
        annotations = {**(rs["metadata"].get("annotations") or {})}
        if replicas:
            revision = int(annotations.get(workloads.REVISION) or 1)
            annotations.update(workloads.replica_set_annotations(deployment, revision))
        if before == replicas and annotations == rs["metadata"].get("annotations"):
            return
        meta = {**rs["metadata"], "annotations": annotations}
        spec = {**rs["spec"], "replicas": replicas}
        namespace = rs["metadata"]["namespace"]
        replica_set = {**rs, "metadata": meta, "spec": spec}
        self.store.update("replicasets", namespace, replica_set, field_manager=MANAGER)
        if before != replicas:
            self._scaled_event(deployment, {**rs, "spec": spec}, before)

    def _scaled_event(self, deployment: dict, rs: dict, before: int) -> None:
        replicas = rs["spec"]["replicas"]
        way = "up" if replicas > before else "down"
        message = f"Scaled {way} replica set {rs['metadata']['name']} from {before} to {replicas}"
        self.event(deployment, "Normal", "ScalingReplicaSet", message, "deployment-controller")

    def _deployment_status(self, deployment: dict) -> None:
        owned = self._owned_replica_sets(deployment)
        new = workloads.current_replica_set(deployment, owned)
        status = workloads.deployment_status(deployment, owned, new, self.clock.timestamp())
        if status != (deployment.get("status") or {}):
            self._write_status("deployments", {**deployment, "status": status})

    def _sync_replica_set(self, rs: dict, pods: list[dict]) -> None:
        namespace = rs["metadata"]["namespace"]
        owned = workloads.owned_pods(rs, pods)
        create, delete = workloads.replica_set_diff(rs, owned)
        for _ in range(create):
            pod = workloads.replica_set_pod(rs, self._random)
            if self._create_owned_pod(rs, pod, "replicaset-controller"):
                owned.append(pod)
        for pod in delete:
            name = pod["metadata"]["name"]
            self._ignore_missing(self.store.delete, "pods", namespace, name)
            message = f"Deleted pod: {name}"
            self.event(rs, "Normal", "SuccessfulDelete", message, "replicaset-controller")
        owned = workloads.owned_pods(rs, self.store.list_refs("pods", namespace)[0])
        status = workloads.replica_set_status(rs, owned)
        if status != (rs.get("status") or {}):
            self._write_status("replicasets", {**rs, "status": status})

    def _sync_stateful_set(self, sts: dict, pods: list[dict]) -> None:
        namespace, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        owned = workloads.owned_pods(sts, pods)
        create, delete = workloads.stateful_set_step(sts, owned)
        for ordinal in create:
            pod = workloads.stateful_set_pod(sts, ordinal)
            message = f"create Pod {pod['metadata']['name']} in StatefulSet {name} successful"
            self._create_owned_pod(sts, pod, "statefulset-controller", message)
        for pod_name in delete:
            self._ignore_missing(self.store.delete, "pods", namespace, pod_name)
            message = f"delete Pod {pod_name} in StatefulSet {name} successful"
            self.event(sts, "Normal", "SuccessfulDelete", message, "statefulset-controller")
        owned = workloads.owned_pods(sts, self.store.list_refs("pods", namespace)[0])
        status = workloads.stateful_set_status(sts, owned)
        if status != (sts.get("status") or {}):
            self._write_status("statefulsets", {**sts, "status": status})

    def _create_owned_pod(self, owner: dict, pod: dict, component: str, message=None) -> bool:
        """Create a pod of a ReplicaSet or StatefulSet; a refusal (quota, a name clash)
        is a FailedCreate event and a back-off before the next try, as for Jobs."""
        uid = owner["metadata"]["uid"]
        until, wait = self._create_backoff.get(uid, (0.0, 0.0))
        if time.monotonic() < until:
            return False
        try:
            self.store.create("pods", owner["metadata"]["namespace"], pod)
        except ApiError as error:
            message = f"Error creating: {error.message}"
            self.event(owner, "Warning", "FailedCreate", message, component)
            low, high = CREATE_BACKOFF
            wait = min(high, wait * 2) if wait else low
            self._create_backoff[uid] = (time.monotonic() + wait, wait)
            return False
        self._create_backoff.pop(uid, None)
        message = message or f"Created pod: {pod['metadata']['name']}"
        self.event(owner, "Normal", "SuccessfulCreate", message, component)
        return True

    # --- nodes: lifecycle, spot reclaims, taint eviction, pod garbage collection ---

    def sync_nodes(self, pods: list[dict]) -> None:
        now = self.clock.now()
        self._advance_spot_capacity(now)
        self._crash_after_xids(now)
        nodes, _ = self.store.list_refs("nodes")
        stamp = format_time(now)
        by_name = {}
        for node in nodes:
            taints = lifecycle.desired_taints(node, stamp)
            if taints != ((node.get("spec") or {}).get("taints") or []):
                spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "taints"}
                if taints:
                    spec["taints"] = taints
                node = (
                    self._ignore_missing(self.store.update, "nodes", None, {**node, "spec": spec})
                    or node
                )
            by_name[node["metadata"]["name"]] = node
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name:
                continue
            try:
                if node_name not in by_name:
                    self._collect_orphan(pod, now)
                else:
                    self._evict_for_taints(pod, by_name[node_name], now)
            except ApiError as error:
                log.debug("node lifecycle of %s: %s", pod["metadata"]["name"], error)

    def _collect_orphan(self, pod: dict, now) -> None:
        """PodGC: a pod bound to a node that no longer exists fails with DisruptionTarget
        (DeletionByPodGC) and is deleted at once."""
        meta = pod["metadata"]
        terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if terminal and meta.get("deletionGracePeriodSeconds") == 0:
            return  # already deleted; waits for its finalizer
        if not terminal:
            status = runtime.disrupted_status(pod, now, "DeletionByPodGC")
            self._write_status("pods", {**pod, "status": status})
        self._ignore_missing(
            self.store.delete, "pods", meta["namespace"], meta["name"], grace_period_seconds=0
        )

    def _evict_for_taints(self, pod: dict, node: dict, now) -> None:
        """The taint eviction controller: NoExecute taints the pod does not tolerate (or
        tolerates only for tolerationSeconds) delete it, with DisruptionTarget reason
        DeletionByTaintManager."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or not scheduler.is_active(pod):
            return
        due = lifecycle.eviction_time(pod, (node.get("spec") or {}).get("taints") or [], now)
        if due is not None and now >= due:
            self.store.evict(
                meta["namespace"],
                meta["name"],
                reason="DeletionByTaintManager",
                message="Taint manager: deleting due to NoExecute taint",
            )
            self.event(
                pod,
                "Normal",
                "TaintManagerEviction",
                f"Marking for deletion Pod {meta['namespace']}/{meta['name']}",
                component="taint-eviction-controller",
            )

    def set_node_ready(self, name: str, status: str, reason=None, message=None) -> dict:
        """POST /_sim/nodes/{name}/condition: the kubelet reports (or stops reporting)."""
        if status not in lifecycle.READY_REASONS:
            raise BadRequest(
                f'status: Unsupported value: "{status}": supported values: '
                '"True", "False", "Unknown"'
            )
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            updated = lifecycle.with_ready(node, status, self.clock.timestamp(), reason, message)
            return self.store.update("nodes", None, updated, subresource="status")

    def reclaim_node(
        self,
        name: str,
        mode: str = "eviction",
        grace_seconds: float = DEFAULT_RECLAIM_GRACE,
        returns_after_seconds: float | None = None,
        *,
        at: datetime | None = None,
    ) -> dict:
        """A spot reclaim. eviction: like a cloud interruption handler, cordon the node
        and evict its pods through the Eviction API; shutdown: like graceful node
        shutdown, the node goes NotReady and its pods fail with DisruptionTarget
        (TerminationByKubelet) when the grace period ends. Either way the node is gone
        after `grace_seconds`, and a replacement joins `returns_after_seconds` later."""
        if mode not in RECLAIM_MODES:
            raise BadRequest(
                f'mode: Unsupported value: "{mode}": supported values: "eviction", "shutdown"'
            )
        at = at or self.clock.now()
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            if name in self._reclaims:
                raise Conflict(message=f'node "{name}" is already being reclaimed')
            self._reclaims[name] = Reclaim(
                mode, at + timedelta(seconds=grace_seconds), returns_after_seconds, node
            )
            self._reclaim_history.append(
                {
                    "node": name,
                    "mode": mode,
                    "at": format_time(at),
                    "deadline": format_time(self._reclaims[name].deadline),
                    # Seconds since the control plane started: equal in repeated runs.
                    "after_seconds": round((at - self._started).total_seconds(), 3),
                }
            )
            if mode == "eviction":
                node["spec"]["unschedulable"] = True
                self.store.update("nodes", None, node)
                self._evict_node(name, grace_seconds)
            else:
                self.set_node_ready(name, "False", "KubeletNotReady", "node is shutting down")
        self.event(
            node,
            "Warning",
            "SpotInterruption",
            f"Node {name} is being reclaimed ({mode})",
            component="kubesim",
        )
        return {
            "node": name,
            "mode": mode,
            "deadline": format_time(self._reclaims[name].deadline),
            "returns_at": None
            if returns_after_seconds is None
            else format_time(
                self._reclaims[name].deadline + timedelta(seconds=returns_after_seconds)
            ),
        }

    def inject_xid(self, name: str, gpu: int, code: int) -> dict:
        """POST /_sim/nodes/{name}/gpus/{gpu}/xid: the driver reports an XID on one GPU.
        The pod using that GPU crashes xid.CRASH_AFTER seconds of the sim clock later
        (its next CUDA call fails), so the exporter shows the XID with the pod still on
        the GPU first, as the generated history does; unless the XID is one the device
        plugin puts down to the application, the GPU turns unhealthy and the node's
        allocatable for its resource drops at once, as the device plugin reports it."""
        now = self.clock.now()
        crash_at = now + timedelta(seconds=xid.CRASH_AFTER)
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            devices = [d for d in cluster.node_devices(node) if d.gpu == gpu]
            if not devices:
                raise NotFound(message=f'node "{name}" has no GPU {gpu}')
            allocatable = xid.allocatable_after(node, devices, code)
            node["metadata"]["annotations"] = xid.with_event(node, gpu, code, format_time(now))
            node = self.store.update("nodes", None, node)
            if allocatable is not None:
                status = node["status"]
                node = self.store.update(
                    "nodes",
                    None,
                    {**node, "status": {**status, "allocatable": allocatable}},
                    subresource="status",
                )
            keys = {d.key for d in devices}
            pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
            crashing = []
            for pod in pods:
                if scheduler.is_active(pod) and keys & set(scheduler.held_device_keys(pod)):
                    meta = pod["metadata"]
                    self._xid_crashes.append(
                        (crash_at, meta["uid"], meta["namespace"], meta["name"], gpu, code,
                         devices[0].resource)
                    )  # fmt: skip
                    crashing.append(f"{meta['namespace']}/{meta['name']}")
        self._wake.set()
        return {
            "node": name,
            "gpu": gpu,
            "code": code,
            "message": xid.message(code),
            "healthy": gpu not in xid.unhealthy_gpus(node),
            "allocatable": node["status"]["allocatable"],
            "crashing": crashing,
            "crash_at": format_time(crash_at) if crashing else None,
        }

    def _crash_after_xids(self, now) -> None:
        """The pods XIDs hit crash once their moment has come on the sim clock (at that
        moment, however late the loop comes to it), unless the run ended by itself
        first or the pod is gone."""
        with self.store.lock:
            due = sorted(c for c in self._xid_crashes if c[0] <= now)
            self._xid_crashes = [c for c in self._xid_crashes if c[0] > now]
            for when, uid, namespace, name, gpu, code, resource in due:
                try:
                    pod = self.store.get("pods", namespace, name)
                except ApiError:
                    continue
                if pod["metadata"].get("uid") != uid:
                    continue
                started = runtime.run_started_at(pod)
                duration = runtime.parse_duration(runtime.annotation(pod, "duration"))
                if started and started + timedelta(seconds=duration) <= when:
                    continue  # it ended by itself first: the kubelet finishes it
                self._crash_on_xid(pod, gpu, code, resource, when)

    def _crash_on_xid(self, pod: dict, gpu: int, code: int, resource: str, now) -> None:
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        status = runtime.killed_status(pod, now, exit_code=1)
        self._write_status("pods", {**pod, "status": status})
        started = runtime.run_started_at(pod)
        crash = (
            f"{format_time(now)} RuntimeError: CUDA error: unspecified launch failure "
            f"(GPU {gpu}: Xid {code}, {xid.message(code)})\n"
        )
        users = {
            c["name"]
            for c in pod["spec"].get("containers") or []
            if resource in ((c.get("resources") or {}).get("limits") or {})
        }
        if started:
            self._log_each(
                pod,
                lambda name: (
                    (crash if name in users else "") + runtime.end_log(pod, started, now, name, 1)
                ),
            )

    def node_report(self) -> dict:
        """GET /_sim/nodes: reclaims so far, pending ones, replacements to come and the
        next random reclaim of every spot node."""
        with self.store.lock:
            return {
                "now": self.clock.timestamp(),
                "reclaims": list(self._reclaim_history),
                "pending": [
                    {"node": n, "mode": r.mode, "deadline": format_time(r.deadline)}
                    for n, r in sorted(self._reclaims.items())
                ],
                "joins": [
                    {"replaces": node["metadata"]["name"], "at": format_time(when)}
                    for when, node in sorted(self._joins, key=lambda item: item[0])
                ],
                "next_reclaim": {
                    n: format_time(t) for n, t in sorted(self._next_reclaim.items()) if t
                },
            }

    def _evict_node(self, name: str, grace_seconds: float) -> None:
        pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
        for pod in pods:
            if not scheduler.is_active(pod) or pod["metadata"].get("deletionTimestamp"):
                continue
            grace = min(int(grace_seconds), pod["spec"].get("terminationGracePeriodSeconds", 30))
            self._ignore_missing(
                self.store.evict,
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                {"gracePeriodSeconds": grace},
            )

    def _advance_spot_capacity(self, now) -> None:
        """Reclaim deadlines, replacements joining and random reclaims, one event at a
        time in sim-time order: after a clock jump the outcome (which nodes go, what the
        new ones are called) is the same however the control loop's ticks fell."""
        self._schedule_random_reclaims(self.store.list_refs("nodes")[0])
        while True:
            events = [(r.deadline, 0, name) for name, r in self._reclaims.items()]
            events += [(when, 1, node["metadata"]["name"]) for when, node in self._joins]
            events += [
                (due, 2, name)
                for name, due in self._next_reclaim.items()
                if due is not None and name not in self._reclaims
            ]
            if not events:
                return
            when, kind, name = min(events)
            if when > now:
                return
            if kind == 0:
                self._finish_reclaim(name)
            elif kind == 1:
                self._join_replacement(when, name)
            else:
                pool = self._spot_pools[self._next_reclaim_pool[name]]
                self._next_reclaim[name] = None
                self.reclaim_node(
                    name,
                    pool.get("reclaimMode", "eviction"),
                    float(pool.get("reclaimGraceSeconds", DEFAULT_RECLAIM_GRACE)),
                    pool.get("replacementAfterSeconds", DEFAULT_REPLACEMENT_AFTER),
                    at=when,
                )

    def _finish_reclaim(self, name: str) -> None:
        reclaim = self._reclaims.pop(name)
        self._gone.add(name)
        if reclaim.mode == "shutdown":
            pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
            for pod in pods:
                if scheduler.is_active(pod):
                    self.disrupt_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._ignore_missing(self.store.delete, "nodes", None, name)
        self._next_reclaim.pop(name, None)
        if reclaim.returns_after is not None:
            when = reclaim.deadline + timedelta(seconds=reclaim.returns_after)
            self._joins.append((when, reclaim.node))

    def _join_replacement(self, when: datetime, old_name: str) -> None:
        index = next(
            i
            for i, (moment, node) in enumerate(self._joins)
            if moment == when and node["metadata"]["name"] == old_name
        )
        _, old = self._joins.pop(index)
        taken = {n["metadata"]["name"] for n in self.store.list_refs("nodes")[0]}
        # A new machine gets a new name (and new GPU UUIDs), as Karpenter's would.
        name = lifecycle.replacement_name(old_name, taken | self._gone)
        node = lifecycle.replacement_node(old, name, format_time(when))
        self.store.create("nodes", None, node)
        self._schedule_random_reclaims([node], joined=when)

    def _schedule_random_reclaims(self, nodes: list[dict], joined: datetime | None = None):
        """Spot pools with reclaimRatePerHour lose each node at a seeded random moment."""
        for node in nodes:
            name = node["metadata"]["name"]
            pool_name = (node["metadata"].get("labels") or {}).get("kubesim.io/pool")
            pool = self._spot_pools.get(pool_name)
            if pool is None or name in self._next_reclaim:
                continue
            self._next_reclaim_pool[name] = pool_name
            self._next_reclaim[name] = lifecycle.next_reclaim(
                pool.get("seed", 0),
                name,
                joined or self._started,
                float(pool["reclaimRatePerHour"]),
            )

    def sync_scheduler(self, pods: list[dict]) -> None:
        pending = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and (p["spec"].get("schedulerName") or "default-scheduler") == "default-scheduler"
            and not p["metadata"].get("deletionTimestamp")
            and not p["spec"].get("schedulingGates")
        ]
        if not pending:
            return
        retry_all = self._schedule_all or time.monotonic() - self._last_full_schedule > FULL_RESYNC
        if retry_all:
            self._schedule_all = False
            self._last_full_schedule = time.monotonic()
        else:
            # Pods already judged unschedulable wait until something frees room.
            pending = [p for p in pending if not _unschedulable(p)]
            if not pending:
                return
        nodes, _ = self.store.list_refs("nodes")
        by_node: dict[str, list[dict]] = {}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and scheduler.is_active(pod):
                by_node.setdefault(node_name, []).append(pod)
        pending.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
        for pod in pending:
            node, message = scheduler.choose_node(pod, nodes, by_node)
            try:
                if node is None:
                    self._mark_unschedulable(pod, message)
                    continue
                bound = self._bind(pod, node, by_node.get(node["metadata"]["name"], []))
            except ApiError as error:
                log.debug("scheduling %s: %s", pod["metadata"]["name"], error)
                continue
            by_node.setdefault(node["metadata"]["name"], []).append(bound)

    def _bind(self, pod: dict, node: dict, pods_on_node: list[dict]) -> dict:
        node_name = node["metadata"]["name"]
        devices = scheduler.assign_devices(pod, node, pods_on_node)
        bound = _copy(pod)
        bound["spec"]["nodeName"] = node_name
        if devices:
            annotations = bound["metadata"].setdefault("annotations", {})
            annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
        bound = self.store.update("pods", pod["metadata"]["namespace"], bound)
        stamp = self.clock.timestamp()
        status = dict(bound.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            }
        )
        status["conditions"] = conditions
        bound = self._write_status("pods", {**bound, "status": status}) or bound
        self.event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} "
            f"to {node_name}",
            component="default-scheduler",
        )
        return bound

    def _mark_unschedulable(self, pod: dict, message: str) -> None:
        status = dict(pod.get("status") or {})
        conditions = status.get("conditions") or []
        current = next((c for c in conditions if c["type"] == "PodScheduled"), None)
        if current and current.get("message") == message:
            return
        conditions = [c for c in conditions if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": self.clock.timestamp(),
            }
        )
        status["conditions"] = conditions
        self._write_status("pods", {**pod, "status": status})
        self.event(pod, "Warning", "FailedScheduling", message, component="default-scheduler")

    def sync_kubelet(self, pods: list[dict]) -> None:
        now = self.clock.now()
        nodes = None
        for pod in pods:
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if not spec.get("nodeName"):
                continue
            if nodes is None:
                nodes = {n["metadata"]["name"]: n for n in self.store.list_refs("nodes")[0]}
            node = nodes.get(spec["nodeName"])
            if node is None or lifecycle.ready_status(node) != "True":
                continue  # no kubelet answers for this node
            phase = status.get("phase", "Pending")
            try:
                if pod["metadata"].get("deletionTimestamp"):
                    self._terminate_pod(pod, now)
                elif phase == "Pending" and not status.get("containerStatuses"):
                    on_node = [
                        p
                        for p in pods
                        if p["spec"].get("nodeName") == spec["nodeName"]
                        and p is not pod
                        and scheduler.is_active(p)
                    ]
                    self._create_containers(pod, node, now, on_node)
                elif phase == "Pending" and runtime.is_creating(pod):
                    self._start_containers(pod, node, now)
                elif phase == "Running":
                    self._advance_pod(pod, now)
            except ApiError as error:
                log.debug("kubelet on %s: %s", pod["metadata"]["name"], error)

    def _terminate_pod(self, pod: dict, now) -> None:
        """A deleted pod: its containers are killed when the grace period runs out, then
        the kubelet confirms the deletion (grace 0), as the real kubelet's status
        manager does once the containers are gone."""
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            if now < parse_time(meta["deletionTimestamp"]):
                return
            status = runtime.killed_status(pod, now)
            self._write_status("pods", {**pod, "status": status})
            started = runtime.run_started_at(pod)
            if started:
                self._log_each(pod, lambda name: runtime.end_log(pod, started, now, name, 137))
        if meta.get("deletionGracePeriodSeconds") != 0:
            self._ignore_missing(
                self.store.delete, "pods", meta["namespace"], meta["name"], grace_period_seconds=0
            )

    def _create_containers(self, pod: dict, node: dict, now, pods_on_node: list[dict]) -> None:
        """The kubelet takes the pod: Pending, containers waiting in ContainerCreating
        (the next pass starts them, as a kubelet reports each step)."""
        if not scheduler.held_device_keys(pod):
            # Pods created with spec.nodeName skip the scheduler: the device plugin
            # still hands them GPUs.
            devices = scheduler.assign_devices(pod, node, pods_on_node)
            if devices:
                pod = _copy(pod)
                annotations = pod["metadata"].setdefault("annotations", {})
                annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
                pod = self.store.update("pods", pod["metadata"]["namespace"], pod)
        status = runtime.creating_status(pod, node, now)
        self._write_status("pods", {**pod, "status": status})
        for container in pod["spec"].get("containers") or []:
            self.event(
                pod,
                "Normal",
                "Pulled",
                f'Container image "{container.get("image")}" already present on machine',
                component="kubelet",
            )

    def _start_containers(self, pod: dict, node: dict, now) -> None:
        status = runtime.running_status(pod, node, now)
        self._write_status("pods", {**pod, "status": status})
        for container in pod["spec"].get("containers") or []:
            self.event(
                pod,
                "Normal",
                "Started",
                f"Started container {container['name']}",
                component="kubelet",
            )
        self._log_each(pod, lambda name: runtime.start_log(pod, now, name))

    def _advance_pod(self, pod: dict, now) -> None:
        status = runtime.next_status(pod, now, job_failed=self._job_failed(pod))
        if status is None:
            return
        first = (pod["spec"].get("containers") or [{}])[0].get("name", "")
        old = next(c for c in pod["status"].get("containerStatuses") or [] if c["name"] == first)
        new = next(c for c in status.get("containerStatuses") or [] if c["name"] == first)
        started = runtime.run_started_at(pod)
        self._write_status("pods", {**pod, "status": status})
        running = bool((new.get("state") or {}).get("running"))
        same_container = old.get("containerID") == new.get("containerID")
        if started and not (running and same_container):
            # The run ended: its exit line, in the log of the container that ran it.
            state = new.get("state") or {}
            terminated = state.get("terminated") or new["lastState"]["terminated"]
            code = terminated.get("exitCode", 0)
            self._log_each(pod, lambda name: runtime.end_log(pod, started, now, name, code))
        if running and not same_container:
            # A new container: a log of its own; the kubelet keeps the last one's, for
            # `previous=true`.
            for container in pod["spec"].get("containers") or []:
                self._log(pod, None, container["name"])
            self._log_each(pod, lambda name: runtime.start_log(pod, now, name))
        if runtime.in_back_off({"status": status}) and not runtime.in_back_off(pod):
            meta = pod["metadata"]
            self.event(
                pod,
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {first} in pod "
                f"{meta['name']}_{meta['namespace']}({meta['uid']})",
                component="kubelet",
            )
        if any(c.get("type") == "DisruptionTarget" for c in status.get("conditions") or []):
            self.event(pod, "Warning", "Killing", status.get("message", ""), component="kubelet")

    def _job_failed(self, pod: dict) -> int:
        """The owning Job's failed count, for `fail-attempts` across pods (read only when
        the annotation asks for it: it costs a store read)."""
        if runtime.annotation(pod, "fail-attempts") is None:
            return 0
        for ref in pod["metadata"].get("ownerReferences") or ():
            if ref.get("kind") == "Job":
                try:
                    job = self.store.get_ref("jobs", pod["metadata"]["namespace"], ref["name"])
                except NotFound:
                    return 0
                return (job.get("status") or {}).get("failed", 0)
        return 0

    # --- outputs ---

    def metrics(self) -> str:
        """DCGM exporter text of every GPU node, for GET /metrics."""
        nodes, _ = self.store.list_refs("nodes")
        pods, _ = self.store.list_refs("pods")
        return dcgm.render(nodes, pods, self.clock.now(), meter=self.energy)

    def metrics_page(self, path: str, address: str) -> tuple[str, str] | None:
        """GET /metrics/<path>: `kube-state-metrics`, `dcgm/{node}` (the exporter pod of
        one node) or `dcgm-targets.json`; None for anything else (404)."""
        if path == "kube-state-metrics":
            objects = {
                resource: self.store.list_refs(resource)[0] for resource in ksm.ROWS_BY_RESOURCE
            }
            return ksm.render_objects(objects, self.ksm_allowlist), TEXT_CONTENT_TYPE
        if path == "dcgm-targets.json":
            return json.dumps(self.dcgm_targets(address), indent=2), "application/json"
        if path.startswith("dcgm/"):
            try:
                node = self.store.get_ref("nodes", None, path[len("dcgm/") :])
            except NotFound:
                return None
            if not dcgm.is_exporter_node(node):
                return None
            pods, _ = self.store.list_refs("pods")
            return dcgm.render_node(node, pods, self.clock.now(), self.energy), TEXT_CONTENT_TYPE
        return None

    def dcgm_targets(self, address: str) -> list[dict]:
        return dcgm.file_sd_targets(self.store.list_refs("nodes")[0], address)

    def keep_file_sd(self, path: str, address: str) -> None:
        """Write the DCGM targets to `path` for Prometheus' file_sd_configs now, and again
        whenever nodes come or go (Prometheus re-reads the file on change)."""
        self._file_sd = (path, address)
        self._write_file_sd()

    def _write_file_sd(self) -> None:
        if not self._file_sd:
            return
        path, address = self._file_sd
        text = json.dumps(self.dcgm_targets(address), indent=2) + "\n"
        with contextlib.suppress(FileNotFoundError), open(path) as handle:
            if handle.read() == text:
                return
        tmp = f"{path}.tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)  # atomic: Prometheus never reads half a file

    def pod_log(self, namespace: str, name: str, container: str = "") -> str:
        return self.store.read_log(namespace, name, container) or ""

    def disrupt_pod(self, namespace: str, name: str, reason: str = "TerminationByKubelet"):
        """Kill a running pod from outside (spot reclaim, preemption) right now."""
        pod = self.store.get("pods", namespace, name)
        status = runtime.disrupted_status(pod, self.clock.now(), reason)
        return self._write_status("pods", {**pod, "status": status})

    def event(self, obj: dict, kind: str, reason: str, message: str, component=None) -> None:
        """Record an Event on `obj`; a repeat of the same event bumps its count, as
        client-go's event correlator does. Repeated warnings (FailedCreate names a new
        pod each time) fold into one event carrying the latest message, so a Job
        blocked by quota for hours keeps one event, not thousands."""
        meta = obj["metadata"]
        component = component or "job-controller"
        key = (meta["uid"], kind, reason, message if kind == "Normal" else "")
        stamp = self.clock.timestamp()
        namespace = meta.get("namespace") or "default"
        try:
            name = self._events.get(key)
            if name:
                try:
                    existing = self.store.get("events", namespace, name)
                    existing["count"] = existing.get("count", 1) + 1
                    existing["lastTimestamp"] = stamp
                    existing["message"] = message
                    self.store.update("events", namespace, existing)
                    return
                except NotFound:
                    pass
            name = f"{meta['name']}.{int(time.time() * 1e6):x}{next(self._event_ids):04x}"
            self._events[key] = name
            self.store.create(
                "events",
                namespace,
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": {
                        "apiVersion": obj.get("apiVersion", "v1"),
                        "kind": obj.get("kind", ""),
                        "name": meta["name"],
                        "namespace": namespace,
                        "uid": meta["uid"],
                        "resourceVersion": meta.get("resourceVersion", ""),
                    },
                    "reason": reason,
                    "message": message,
                    "type": kind,
                    "count": 1,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "source": {"component": component},
                    "reportingComponent": component,
                    "reportingInstance": "",
                },
            )
        except ApiError as error:  # e.g. the namespace is being deleted
            log.debug("event %s on %s: %s", reason, meta["name"], error)

    # --- helpers ---

    def _write_status(self, resource: str, obj: dict) -> dict | None:
        namespace = obj["metadata"].get("namespace")
        return self._ignore_missing(
            self.store.update, resource, namespace, obj, subresource="status"
        )

    def _log_each(self, pod: dict, text_for) -> None:
        """Append text_for(container name) to every container's log."""
        for container in (pod.get("spec") or {}).get("containers") or []:
            self._log(pod, text_for(container["name"]), container["name"])

    def _log(self, pod: dict, text: str | None, container: str = "") -> None:
        """Append to a container's log ("" or the first container's name: the first);
        None starts the log of a new container."""
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        if container == containers[0].get("name"):
            container = ""
        meta = pod["metadata"]
        if text is None:
            self.store.new_container_log(meta["namespace"], meta["name"], container)
        else:
            self.store.append_log(meta["namespace"], meta["name"], text, container)

    @staticmethod
    def _ignore_missing(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotFound:
            return None


def _annotation(obj: dict, key: str) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(key)


def _owners(pod: dict) -> list[dict]:
    return [r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")]


def _frees_resources(event_type: str, pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return event_type == "DELETED" or phase in ("Succeeded", "Failed")


def _unschedulable(pod: dict) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _copy(obj: dict) -> dict:
    return copy.deepcopy(obj)
