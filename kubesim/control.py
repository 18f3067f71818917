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
from pathlib import Path

from kubesim import cluster, dcgm, jobs, ksm, kubelet, quota, scheduler
from kubesim.errors import AlreadyExists, ApiError, Forbidden, NotFound
from kubesim.exposition import TEXT_CONTENT_TYPE

log = logging.getLogger(__name__)

TICK = 0.1  # seconds of real time between syncs
FULL_RESYNC = 2.0  # real seconds between full scheduler retries of pending pods
CREATE_BACKOFF = (0.5, 10.0)  # real seconds: first and longest wait after a FailedCreate
DEFAULT_CLUSTER = Path(__file__).parent / "clusters" / "demo.yaml"
SMALL_CLUSTER = str(Path(__file__).parent / "clusters" / "small.yaml")


def install(sim, cluster_path: str | Path | None = None) -> ControlPlane:
    """Load the cluster's nodes into `sim.store` and hook the control plane into `sim`."""
    plane = ControlPlane(sim.store)
    plane.load_cluster(cluster_path or DEFAULT_CLUSTER)
    plane.install_admission()
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
        # Namespaces where a quota changed or a pod ended: blocked Jobs retry at once.
        self._room_namespaces: set[str] = set()
        self._events: dict[tuple, str] = {}  # (uid, type, reason, message) -> event name
        self._event_ids = itertools.count(1)
        self._random = random.Random()
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
        if resource in ("pods", "jobs", "nodes"):
            self._wake.set()

    # --- setup ---

    def load_cluster(self, path: str | Path) -> None:
        for node in cluster.build_nodes(cluster.load(path)):
            with contextlib.suppress(AlreadyExists):
                self.store.create("nodes", None, node)

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
        self.sync_quotas()
        pods, _ = self.store.list_refs("pods")
        self.sync_jobs(pods)
        pods, _ = self.store.list_refs("pods")
        self.sync_scheduler(pods)
        pods, _ = self.store.list_refs("pods")
        self.sync_kubelet(pods)

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
        if not jobs_list:
            return
        by_owner: dict[str, list[dict]] = {}
        for pod in pods:
            for ref in pod["metadata"].get("ownerReferences") or ():
                if ref.get("controller") and ref.get("kind") == "Job":
                    by_owner.setdefault(ref["uid"], []).append(pod)
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
        actions = jobs.reconcile(job, pods, now)
        if actions.delete_job:
            # TTL ran out: the job and its pods go (the TTL controller deletes in background).
            self._ignore_missing(
                self.store.delete, "jobs", namespace, name, propagation_policy="Background"
            )
            self._create_backoff.pop(meta["uid"], None)
            return
        for pod_name in actions.delete:
            self._ignore_missing(self.store.delete, "pods", namespace, pod_name)
            self.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
        for kind, reason, message in actions.events:
            self.event(job, kind, reason, message)
        if actions.create:
            actions.status["active"] += self._create_pods(job, actions.create)
        if actions.status != (job.get("status") or {}):
            self._write_status("jobs", {**job, "status": actions.status})

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

    def sync_scheduler(self, pods: list[dict]) -> None:
        pending = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and (p["spec"].get("schedulerName") or "default-scheduler") == "default-scheduler"
            and not p["metadata"].get("deletionTimestamp")
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
            if not spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            phase = status.get("phase", "Pending")
            try:
                if phase == "Pending" and not status.get("containerStatuses"):
                    if nodes is None:
                        nodes = {n["metadata"]["name"]: n for n in self.store.list_refs("nodes")[0]}
                    node = nodes.get(spec["nodeName"])
                    if node:
                        on_node = [
                            p
                            for p in pods
                            if p["spec"].get("nodeName") == spec["nodeName"]
                            and p is not pod
                            and scheduler.is_active(p)
                        ]
                        self._start_pod(pod, node, now, on_node)
                elif phase == "Running":
                    self._advance_pod(pod, now)
            except ApiError as error:
                log.debug("kubelet on %s: %s", pod["metadata"]["name"], error)

    def _start_pod(self, pod: dict, node: dict, now, pods_on_node: list[dict]) -> None:
        if not scheduler.held_device_keys(pod):
            # Pods created with spec.nodeName skip the scheduler: the device plugin
            # still hands them GPUs.
            devices = scheduler.assign_devices(pod, node, pods_on_node)
            if devices:
                pod = _copy(pod)
                annotations = pod["metadata"].setdefault("annotations", {})
                annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
                pod = self.store.update("pods", pod["metadata"]["namespace"], pod)
        status = kubelet.running_status(pod, node, now)
        self._write_status("pods", {**pod, "status": status})
        for container in pod["spec"].get("containers") or []:
            self.event(
                pod,
                "Normal",
                "Pulled",
                f'Container image "{container.get("image")}" already present on machine',
                component="kubelet",
            )
            self.event(
                pod,
                "Normal",
                "Started",
                f"Started container {container['name']}",
                component="kubelet",
            )
        first = (pod["spec"].get("containers") or [{}])[0].get("name", "")
        self._log(pod, kubelet.start_log(pod, now, first))

    def _advance_pod(self, pod: dict, now) -> None:
        status = kubelet.next_status(pod, now, job_failed=self._job_failed(pod))
        if status is None:
            return
        first = (pod["spec"].get("containers") or [{}])[0].get("name", "")
        old = next(c for c in pod["status"].get("containerStatuses") or [] if c["name"] == first)
        new = next(c for c in status.get("containerStatuses") or [] if c["name"] == first)
        started = kubelet.run_started_at(pod)
        terminated = (new.get("state") or {}).get("terminated") or (new.get("lastState") or {}).get(
            "terminated"
        )
        self._write_status("pods", {**pod, "status": status})
        if terminated and started:
            code = terminated.get("exitCode", 0)
            self._log(pod, kubelet.end_log(pod, started, now, first, code))
            if new.get("restartCount", 0) > old.get("restartCount", 0):
                self._log(pod, kubelet.start_log(pod, now, first))
        if any(c.get("type") == "DisruptionTarget" for c in status.get("conditions") or []):
            self.event(pod, "Warning", "Killing", status.get("message", ""), component="kubelet")

    def _job_failed(self, pod: dict) -> int:
        """The owning Job's failed count, for `fail-attempts` across pods (read only when
        the annotation asks for it: it costs a store read)."""
        if kubelet.annotation(pod, "fail-attempts") is None:
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

    def pod_log(self, namespace: str, name: str) -> str:
        with self.store.lock:
            return self.store.logs.get((namespace, name), "")

    def disrupt_pod(self, namespace: str, name: str, reason: str = "TerminationByKubelet"):
        """Kill a running pod from outside (spot reclaim, preemption) right now."""
        pod = self.store.get("pods", namespace, name)
        status = kubelet.disrupted_status(pod, self.clock.now(), reason)
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

    def _log(self, pod: dict, text: str) -> None:
        self.store.append_log(pod["metadata"]["namespace"], pod["metadata"]["name"], text)

    @staticmethod
    def _ignore_missing(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotFound:
            return None


def _frees_resources(event_type: str, pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return event_type == "DELETED" or phase in ("Succeeded", "Failed")


def _unschedulable(pod: dict) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _copy(obj: dict) -> dict:
    return copy.deepcopy(obj)
