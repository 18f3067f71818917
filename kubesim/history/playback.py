"""Plays a workload on the cluster's nodes step by step (sim time, nothing served),
and writes per step the samples the live exporters would have served, and the
answer's rows."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from kubesim import cluster
from kubesim.apiserver import quota
from kubesim.clock import format_time
from kubesim.controllers import nodes as lifecycle
from kubesim.controllers import scheduler, xid
from kubesim.exporters import dcgm, ksm
from kubesim.exposition import go_float, scraped, series_key
from kubesim.kubelet import runtime

from .objects import Live, new_live, object_uid, sync_job
from .output import Spools
from .workload import (
    HistoryError,
    Incident,
    Run,
    Workload,
    as_datetime,
)

BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
KSM_INSTANCE = "kube-state-metrics:8080"
SPOT_LABEL = ("karpenter.sh/capacity-type", "spot")  # what the cluster file gives spot pools
RECLAIM_GRACE = 120.0  # a reclaimed node goes this long after its notice (controllers/spot.py)
EVICTION_GRACE = 30.0  # an evicted pod is deleted after its terminationGracePeriodSeconds
XID_CRASH_AFTER = xid.CRASH_AFTER  # the pod on the GPU crashes this long after an XID


# --- the simulation ---


class Cluster:
    """The nodes, their devices, and which are cordoned or gone. Where a pod goes is the
    scheduler's decision (`scheduler.place`), as on the live cluster."""

    def __init__(self, nodes: list[dict], boot: float):
        self.nodes: list[dict] = []
        self.devices: dict[str, list] = {}
        self.physical: dict[str, list] = {}
        self.boot: dict[str, float] = {}  # node -> when it booted (DCGM's energy counter)
        self.cordoned: set[str] = set()
        self.gone: set[str] = set()  # reclaimed node names: never used again
        self.last_xid: dict[tuple, int] = {}  # (node, gpu) -> DCGM_FI_DEV_XID_ERRORS
        for node in nodes:
            self.add(node, boot)

    def node(self, name: str) -> dict | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def add(self, node: dict, boot: float) -> None:
        name = node["metadata"]["name"]
        self.nodes = sorted([*self.nodes, node], key=lambda n: n["metadata"]["name"])
        self.devices[name] = cluster.node_devices(node)
        self.physical[name] = dcgm.physical_devices(self.devices[name])
        self.boot[name] = boot

    def replace(self, node: dict) -> None:
        """The same node with new annotations or status (a new object: cached rows go)."""
        name = node["metadata"]["name"]
        self.nodes = [node if n["metadata"]["name"] == name else n for n in self.nodes]

    def remove(self, name: str) -> None:
        self.nodes = [n for n in self.nodes if n["metadata"]["name"] != name]
        self.cordoned.discard(name)
        self.gone.add(name)

    def schedulable(self) -> list[dict]:
        """The nodes new pods may go to (a cordoned node is unschedulable)."""
        return [n for n in self.nodes if n["metadata"]["name"] not in self.cordoned]


@dataclass
class Usage:
    """One pod's accumulators for the hour being played."""

    live: Live
    steps: int = 0
    busy: int = 0  # device-steps at or above the threshold
    idle: int = 0
    unobserved: int = 0
    utilisation: float = 0.0
    peak_fb: int | None = None


class History:
    def __init__(
        self,
        nodes: list[dict],
        workload: Workload,
        start: float,
        end: float,
        step: float,
        allowlist: dict | None = None,
        dcgm_honor_labels: bool = False,
        selected=lambda family: True,
    ):
        self.cluster = Cluster(nodes, start)
        self.dcgm_fields = [f for f in dcgm.FIELDS if selected(f.family.name)]
        self.ksm_families = {f.name for f in ksm.FAMILIES if selected(f.name)}
        # The labels the documented scrape config gives each series (docs/kubesim.md).
        self.ksm_target = {"job": "kube-state-metrics", "instance": KSM_INSTANCE}
        self.dcgm_targets = dcgm.target_labels(nodes, KSM_INSTANCE)
        self.dcgm_honor_labels = dcgm_honor_labels
        self.workload = workload
        self.start, self.end, self.step = start, end, step
        self.allowlist = ksm.DEFAULT_ALLOWLIST if allowlist is None else allowlist
        self.meter = dcgm.EnergyMeter()
        self.threshold = workload.threshold
        self.namespaces = {
            name: {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": spec["labels"], "uid": object_uid("ns", name)},
                "status": {"phase": "Active"},
            }
            for name, spec in workload.namespaces.items()
        }
        self.live: dict[tuple, Live] = {}  # (namespace, pod name) -> run alive now
        self.pending: list[Live] = []  # created, not yet tried by the scheduler
        # Refused by the scheduler, in creation order. A refusal stands until a pod ends
        # or a node changes (placing pods only takes room), so they are tried again only
        # then, as the live scheduler retries on such changes.
        self.unschedulable: list[Live] = []
        self._room_changed = False
        self.usage: dict[tuple, Usage] = {}
        self.ksm_dirty = True
        self._ksm: dict[str, list[str]] = {}
        self._ksm_cache: dict[int, tuple] = {}  # id(object) -> (object, rows)
        self._quota_cache: dict[str, dict] = {}
        self._idle_prefixes: dict = {}  # device key, or (key, XID) after one -> prefixes
        # What happens to nodes, in time order: (when, order, action, arguments).
        self.timeline: list[tuple] = []
        self._order = 0
        for incident in workload.incidents:
            self._due(incident.at, self._xid if incident.xid else self._reclaim, incident)

    # -- state changes --

    def _changed(self, namespace: str) -> None:
        self.ksm_dirty = True
        self._quota_cache.pop(namespace, None)

    def _admit(self, run: Run, at: float) -> None:
        namespace = self.workload.namespaces[run.entry.namespace]
        live = new_live(run, namespace["labels"], at)
        self.live[(run.entry.namespace, live.pod["metadata"]["name"])] = live
        self.pending.append(live)
        self._changed(run.entry.namespace)

    def _schedule(self, at: float) -> None:
        if self._room_changed:
            queue, still = self.unschedulable + self.pending, []
            self._room_changed = False
        else:
            queue, still = self.pending, self.unschedulable
        self.pending = []
        if not queue:
            return
        nodes = self.cluster.schedulable()
        by_node: dict[str, list[dict]] = {}  # the pods holding each node's GPUs
        for live in self.live.values():
            if live.node is not None and scheduler.is_active(live.pod):
                by_node.setdefault(live.node["metadata"]["name"], []).append(live.pod)
        for live in queue:
            entry = live.run.entry
            node, devices, _ = scheduler.place(live.pod, nodes, by_node)
            if node is None:
                still.append(live)
                continue
            pod = live.pod
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            annotations = pod["metadata"]["annotations"]
            annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
            live.pod = {**pod, "status": runtime.running_status(pod, node, as_datetime(at))}
            by_node.setdefault(node["metadata"]["name"], []).append(live.pod)
            live.node, live.devices = node, devices
            live.started, live.ends = at, at + entry.duration
            sync_job(live, at)
            self._changed(entry.namespace)
        self.unschedulable = still

    def _finish(self, at: float) -> None:
        for key, live in list(self.live.items()):
            if live.ends is not None and live.gone is None and at >= live.ends:
                ending = live.ending or runtime.next_status
                live.pod = {**live.pod, "status": ending(live.pod, as_datetime(live.ends))}
                sync_job(live, live.ends)
                self._room_changed = True
                live.gone = live.ends + (self.workload.retain if live.kept is None else live.kept)
                self._changed(key[0])
            if live.gone is not None and at >= live.gone:
                del self.live[key]
                self._changed(key[0])

    # -- incidents: XIDs and spot reclaims, as the control plane plays them live --

    def _due(self, when: float, action, *args) -> None:
        self._order += 1
        heapq.heappush(self.timeline, (when, self._order, action, args))

    def _happen(self, at: float) -> None:
        while self.timeline and self.timeline[0][0] <= at:
            when, _, action, args = heapq.heappop(self.timeline)
            action(when, *args)
            self._room_changed = True  # a node changed, joined or went

    def _node_at(self, incident: Incident, when: float) -> dict:
        node = self.cluster.node(incident.node)
        if node is None:
            gone = "was reclaimed before" if incident.node in self.cluster.gone else "is not in"
            raise HistoryError(
                f"{incident.where}: node {incident.node!r} {gone} the cluster at "
                f"{format_time(as_datetime(when))}"
            )
        return node

    def _running_on(self, name: str, when: float) -> list[Live]:
        return [
            live
            for live in self.live.values()
            if live.node is not None
            and live.node["metadata"]["name"] == name
            and live.started is not None
            and when < live.ends
        ]

    def _cut_short(self, live: Live, when: float, ending, kept: float | None) -> None:
        live.ends, live.ending, live.kept = when, ending, kept

    def _xid(self, when: float, incident: Incident) -> None:
        """The driver reports an XID: the pod on that GPU crashes XID_CRASH_AFTER later;
        unless the XID is the application's, the GPU turns unhealthy (the node's
        allocatable drops, nothing is placed on it again)."""
        node = self._node_at(incident, when)
        name, gpu, code = incident.node, incident.gpu, incident.xid
        devices = [d for d in self.cluster.devices[name] if d.gpu == gpu]
        if not devices:
            raise HistoryError(f"{incident.where}.gpu: node {name!r} has no GPU {gpu}")
        allocatable = xid.allocatable_after(node, devices, code)
        metadata = {
            **node["metadata"],
            "annotations": xid.with_event(node, gpu, code, format_time(as_datetime(when))),
        }
        status = (
            node["status"]
            if allocatable is None
            else {**node["status"], "allocatable": allocatable}
        )
        self.cluster.replace({**node, "metadata": metadata, "status": status})
        self.cluster.last_xid[(name, gpu)] = code
        keys = {d.key for d in devices}
        for live in self._running_on(name, when):
            if keys.intersection(d.key for d in live.devices):
                crash = min(when + XID_CRASH_AFTER, live.ends)
                self._cut_short(live, crash, lambda pod, t: runtime.killed_status(pod, t, 1), None)
        self.ksm_dirty = True

    def _reclaim(self, when: float, incident: Incident) -> None:
        """A spot interruption, as an interruption handler drains it: the node is cordoned
        and its pods evicted (DisruptionTarget), the node goes RECLAIM_GRACE later."""
        node = self._node_at(incident, when)
        key, value = SPOT_LABEL
        if node["metadata"].get("labels", {}).get(key) != value:
            raise HistoryError(f"{incident.where}.reclaim: {incident.node!r} is not a spot node")
        self.cluster.cordoned.add(incident.node)

        def evicted(pod, t):
            return runtime.disrupted_status(pod, t, "EvictionByEvictionAPI")

        for live in self._running_on(incident.node, when):
            self._cut_short(live, when, evicted, EVICTION_GRACE)
        self._due(when + RECLAIM_GRACE, self._node_gone, incident)

    def _node_gone(self, when: float, incident: Incident) -> None:
        old = self.cluster.node(incident.node)
        self.cluster.remove(incident.node)
        for live in self.live.values():  # PodGC: pods of a node that no longer exists
            if live.node is not None and live.node["metadata"]["name"] == incident.node:
                live.gone = min(live.gone if live.gone is not None else when, when)
        self.ksm_dirty = True
        if incident.returns_after is not None:
            self._due(when + incident.returns_after, self._join, old)

    def _join(self, when: float, old: dict) -> None:
        """A new machine in the reclaimed node's pool: a new name, new GPU UUIDs."""
        taken = {n["metadata"]["name"] for n in self.cluster.nodes} | self.cluster.gone
        name = lifecycle.replacement_name(old["metadata"]["name"], taken)
        node = lifecycle.replacement_node(old, name, format_time(as_datetime(when)))
        node["metadata"].update(
            creationTimestamp=format_time(as_datetime(when)), uid=object_uid("node", name)
        )
        self.cluster.add(node, when)
        self.dcgm_targets = dcgm.target_labels(self.cluster.nodes, KSM_INSTANCE)
        self.ksm_dirty = True

    # -- kube-state-metrics --

    def _rows(self, rows_for, obj: dict) -> tuple:
        """Rendered `series value` strings of one object, cached while it is unchanged."""
        cached = self._ksm_cache.get(id(obj))
        if cached is None or cached[0] is not obj:
            target, wanted = self.ksm_target, self.ksm_families
            rows = [
                (family, f"{series_key(family, scraped(labels, target, True))} {go_float(value)}")
                for family, labels, value in rows_for(obj, self.allowlist)
                if family in wanted
            ]
            cached = (obj, rows)
            self._ksm_cache[id(obj)] = cached
        return cached[1]

    def _ksm_lines(self) -> dict[str, list[str]]:
        if not self.ksm_dirty:
            return self._ksm
        by_family: dict[str, list[str]] = {}
        for live in self.live.values():
            if live.job is not None and "status" not in live.job:
                sync_job(live, live.created)  # a Job whose pod is still Pending
        objects = [
            (ksm.job_rows, [live.job for live in self.live.values() if live.job]),
            (ksm.namespace_rows, self.namespaces.values()),
            (ksm.node_rows, self.cluster.nodes),
            (ksm.pod_rows, [live.pod for live in self.live.values()]),
            (ksm.quota_rows, self._quotas()),
        ]
        alive = set()
        for rows_for, items in objects:
            for obj in items:
                alive.add(id(obj))
                for family, line in self._rows(rows_for, obj):
                    by_family.setdefault(family, []).append(line)
        self._ksm_cache = {k: v for k, v in self._ksm_cache.items() if k in alive}
        self._ksm, self.ksm_dirty = by_family, False
        return by_family

    def _quotas(self) -> list[dict]:
        """The portal's ResourceQuota per namespace, `used` recomputed only where pods
        changed."""
        pods_by_namespace: dict[str, list[dict]] = {}
        for (namespace, _), live in self.live.items():
            pods_by_namespace.setdefault(namespace, []).append(live.pod)
        for name, spec in self.workload.namespaces.items():
            hard = spec["quota"]
            if hard and name not in self._quota_cache:
                usage = quota.total_usage(pods_by_namespace.get(name, []))
                self._quota_cache[name] = {
                    "metadata": {"name": "gpu-quota", "namespace": name},
                    "spec": {"hard": hard},
                    "status": {"hard": hard, "used": quota.used_status(hard, usage, 0)},
                }
        return list(self._quota_cache.values())

    # -- DCGM --

    def _prefixes(self, device, live: Live | None, code: int) -> dict[str, str]:
        """`NAME{labels} ` per DCGM family for a device, its holder and its GPU's last XID
        (DCGM_FI_DEV_XID_ERRORS names it in labels), made once."""
        cache = live.prefixes if live else self._idle_prefixes
        key = (device.key, code) if code else device.key  # no tuple in the common case
        prefixes = cache.get(key)
        if prefixes is None:
            labels = dcgm.device_labels(device, live.pod if live else None)
            target, honor = self.dcgm_targets[device.node], self.dcgm_honor_labels
            prefixes = {}
            for f in dcgm.FIELDS:
                name = f.family.name
                stored = scraped(dcgm.family_labels(name, labels, code), target, honor)
                prefixes[name] = series_key(name, stored) + " "
            cache[key] = prefixes
        return prefixes

    def _usage(self, live: Live) -> Usage:
        usage = self.usage.get(id(live))
        if usage is None:
            usage = self.usage[id(live)] = Usage(live)
        return usage

    # -- the loop --

    def play(self, spools: Spools, answer) -> None:
        runs = self.workload.runs()
        upcoming = next(runs, None)
        hour = None
        step_count = int(-(-(self.end - self.start) // self.step))
        for index in range(step_count):
            at = self.start + index * self.step
            spools.step(at)
            while upcoming is not None and upcoming.start <= at:
                self._admit(upcoming, at)
                upcoming = next(runs, None)
            self._happen(at)
            self._finish(at)
            self._schedule(at)
            if int(at // 3600) != hour:
                if hour is not None:
                    self._flush(hour, answer)
                hour = int(at // 3600)
            stamp = f" {at:.0f}\n" if at == int(at) else f" {at:.3f}\n"
            listed = not any(
                gap.covers("kube-state-metrics", None, at) for gap in self.workload.gaps
            )
            if listed:
                for family, lines in self._ksm_lines().items():
                    spools.write(family, stamp.join(lines) + stamp, len(lines))
            holders = {}
            running = []
            for live in self.live.values():
                if live.started is not None and live.gone is None and at < live.ends:
                    running.append(live)
                    for device in live.devices:
                        holders[device.key] = live
            self._dcgm_step(at, stamp, holders, spools, listed)
            for live in running:
                self._usage(live).steps += 1
        if hour is not None:
            self._flush(hour, answer)

    def _dcgm_step(
        self, at: float, stamp: str, holders: dict, spools: Spools, listed: bool = True
    ) -> None:
        """One step of every exporter. In a kube-state-metrics gap (not `listed`)
        a pod's device-steps are unobserved: its requests and phase are not known
        then, only that the exporter saw it hold the device."""
        threshold = self.threshold
        fields = [(f, f.family.name, f.integer) for f in self.dcgm_fields]
        out: dict[str, list[str]] = {name: [] for _, name, _ in fields}
        last_xid, boot = self.cluster.last_xid, self.cluster.boot
        for node in self.cluster.nodes:
            name = node["metadata"]["name"]
            observed = not any(gap.covers("dcgm", name, at) for gap in self.workload.gaps)
            for device, keys in self.cluster.physical[name]:
                lives = dcgm.holders_of(keys, holders)
                if not observed:
                    for live in lives:
                        self._usage(live).unobserved += _replicas(live, keys)
                    continue
                loads = [(live.run.entry.load, live.started) for live in lives]
                code = last_xid.get((name, device.gpu), 0) if last_xid else 0
                values = dcgm.sample(device, loads, at, code, self.meter, boot[name])
                for live in lives or [None]:
                    prefixes = self._prefixes(device, live, code)
                    for _, family, integer in fields:
                        value = values[family]
                        text = str(int(value)) if integer else f"{value:f}"  # dcgm.format_value
                        out[family].append(prefixes[family] + text + stamp)
                busy = values[BUSY_METRIC]
                fb = values["DCGM_FI_DEV_FB_USED"]
                for live in lives:
                    # A pod holding two replicas of one time-sliced GPU held two devices.
                    weight = _replicas(live, keys)
                    usage = self._usage(live)
                    if not listed:
                        usage.unobserved += weight
                        continue
                    if busy >= threshold:
                        usage.busy += weight
                    else:
                        usage.idle += weight
                    usage.utilisation += busy * weight
                    usage.peak_fb = fb if usage.peak_fb is None else max(usage.peak_fb, fb)
        for family, lines in out.items():
            spools.write(family, "".join(lines), len(lines))

    def _flush(self, hour: int, answer) -> None:
        """Write the answer rows of the hour that just ended."""
        minutes = self.step / 60
        rows = []
        for usage in self.usage.values():
            live = usage.live
            if not usage.steps:
                continue
            observed = usage.busy + usage.idle
            gpus = len(live.devices)
            rows.append(
                {
                    "hour": format_time(as_datetime(hour * 3600)),
                    "namespace": live.run.entry.namespace,
                    "pod": live.pod["metadata"]["name"],
                    "job": live.job["metadata"]["name"] if live.job else "",
                    "node": live.node["metadata"]["name"],
                    "resource": live.run.entry.resource,
                    "gpus": gpus,
                    "held_minutes": _number(usage.steps * minutes),
                    "gpu_minutes": _number(usage.steps * minutes * gpus),
                    "busy_gpu_minutes": _number(usage.busy * minutes),
                    "idle_gpu_minutes": _number(usage.idle * minutes),
                    "unobserved_gpu_minutes": _number(usage.unobserved * minutes),
                    "mean_utilisation": round(usage.utilisation / observed, 6)
                    if observed
                    else None,
                    "peak_fb_used_mib": usage.peak_fb,
                }
            )
        rows.sort(key=lambda r: (r["namespace"], r["pod"]))
        for row in rows:
            answer.write(row)
        self.usage = {}


def _replicas(live: Live, keys: list[str]) -> int:
    return sum(1 for device in live.devices if device.key in keys)


def _number(value: float):
    return int(value) if value == int(value) else round(value, 6)
