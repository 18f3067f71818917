"""The simulated control plane: admission plugins plus one background loop that runs
the controllers, the scheduler and the kubelet against the store.

The loop ticks every TICK seconds of real time (sooner when the store changes) and
judges every deadline by the sim clock, so `POST /_sim/clock {"advance": ...}` moves
work along without real waiting. Decisions live in pure modules (quota, jobs,
workloads, nodes, scheduler, runtime, dcgm); the parts here read the store and write
the results:

    apiserver/admission.py                    quota and LimitRange admission
    controllers/namespace_controller.py       Terminating namespaces emptied
    controllers/quota_controller.py           ResourceQuota status.used
    controllers/spot.py                       spot reclaims and replacement nodes
    kubelet/xids.py                           XIDs: unhealthy GPUs, crashing pods
    controllers/node_lifecycle_controller.py  taints, taint eviction, pod GC
    controllers/job_controller.py             batch/v1 Jobs
    controllers/workload_controllers.py       Deployments, ReplicaSets, StatefulSets
    controllers/default_scheduler.py          binding pending pods
    kubelet/kubelet.py                        pods through their phases, logs
    exporters/pages.py                        DCGM and kube-state-metrics pages
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path

from kubesim import cluster
from kubesim.apiserver import admission
from kubesim.apiserver.errors import AlreadyExists
from kubesim.apiserver.resources import APPS
from kubesim.cluster import DEFAULT_CLUSTER
from kubesim.controllers.default_scheduler import DefaultScheduler
from kubesim.controllers.events import EventRecorder
from kubesim.controllers.job_controller import JobController
from kubesim.controllers.namespace_controller import NamespaceController
from kubesim.controllers.node_lifecycle_controller import NodeLifecycleController
from kubesim.controllers.quota_controller import QuotaController
from kubesim.controllers.spot import SpotReclaimer
from kubesim.controllers.workload_controllers import WorkloadControllers
from kubesim.exporters.pages import Exporters
from kubesim.kubelet.kubelet import Kubelet
from kubesim.kubelet.xids import Xids

log = logging.getLogger(__name__)

TICK = 0.1  # seconds of real time between syncs


def install(sim, cluster_path: str | Path | None = None) -> ControlPlane:
    """Load the cluster's nodes into `sim.store` and hook the control plane into `sim`."""
    plane = ControlPlane(sim.store)
    plane.load_cluster(cluster_path or DEFAULT_CLUSTER)
    admission.install(sim.store)
    sim.store.namespace_lifecycle = True
    sim.controllers.append(plane)
    sim.metrics_provider = plane.exporters.metrics
    sim.metrics_pages = plane.exporters.metrics_page
    sim.control_plane = plane
    return plane


class ControlPlane:
    def __init__(self, store):
        self.store = store
        self.clock = store.clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        recorder = EventRecorder(store)
        self.namespaces = NamespaceController(store, recorder)
        self.quotas = QuotaController(store, recorder)
        self.kubelet = Kubelet(store, recorder)
        self.spot = SpotReclaimer(store, recorder, self.kubelet)
        self.xids = Xids(store, recorder, self.kubelet, wake=self._wake.set)
        self.node_lifecycle = NodeLifecycleController(store, recorder)
        self.jobs = JobController(store, recorder)
        self.workloads = WorkloadControllers(store, recorder)
        self.scheduler = DefaultScheduler(store, recorder)
        self.exporters = Exporters(store)
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
        # Runs inside the store lock: each part only notes what concerns it.
        for part in (self.quotas, self.scheduler, self.exporters, self.jobs):
            part.on_change(event_type, resource, obj)
        if resource in ("pods", "jobs", "nodes", *APPS):
            self._wake.set()

    def load_cluster(self, path: str | Path) -> None:
        data = cluster.load(path)
        for node in cluster.build_nodes(data):
            with contextlib.suppress(AlreadyExists):
                self.store.create("nodes", None, node)
        self.spot.pools = {
            pool["name"]: pool for pool in data["nodePools"] if pool.get("reclaimRatePerHour")
        }

    # --- the loop ---

    def sync(self) -> None:
        """One pass of every part, in this order."""
        self.exporters.sync()
        self.namespaces.sync()
        self.quotas.sync()
        pods, _ = self.store.list_refs("pods")
        now = self.clock.now()
        self.spot.advance(now)
        self.xids.crash_due(now)
        self.node_lifecycle.sync(pods, now)
        pods, _ = self.store.list_refs("pods")
        self.jobs.sync(pods)
        self.workloads.sync()
        pods, _ = self.store.list_refs("pods")
        self.scheduler.sync(pods)
        pods, _ = self.store.list_refs("pods")
        self.kubelet.sync(pods)
