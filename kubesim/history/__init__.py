"""Prometheus history for a described workload, and the exact answer billing must find.

    python -m kubesim history --cluster FILE --workload FILE --from T --to T --out FILE
        [--step 60s] [--answer FILE.json|FILE.csv] [--threshold 0.05] [--metrics REGEX]
        [--split 24h]

Plays the workload on the cluster's nodes step by step (sim time, nothing served)
and writes, per step, the samples the live endpoints would have served at that
moment: kube-state-metrics (`ksm.*_rows`) and one DCGM exporter per GPU node
(`dcgm.sample`), rendered by the same functions as `/metrics/kube-state-metrics` and
`/metrics/dcgm/{node}`. The output is OpenMetrics text for `promtool tsdb
create-blocks-from openmetrics`: one family after another (each family is spooled to
its own temporary file while the steps run, so memory stays bounded by the pods
alive at one time), samples of a series in time order, `# EOF` at the end.

The answer (JSON or CSV) has one row per pod and hour in which the pod held GPUs:
GPUs held, minutes held, GPU-minutes at/above and below the utilisation threshold
(DCGM_FI_PROF_GR_ENGINE_ACTIVE, as exported), GPU-minutes with no DCGM sample (scrape
gaps), mean utilisation and peak framebuffer. The file format is in docs/kubesim.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import heapq
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import yaml

from kubesim import cluster
from kubesim.apiserver import quota
from kubesim.clock import format_time
from kubesim.controllers import jobs, scheduler, xid
from kubesim.controllers import nodes as lifecycle
from kubesim.exporters import dcgm, ksm
from kubesim.exporters.exposition import go_float, scraped, series_key
from kubesim.kubelet import runtime

MANAGED_BY = "gpu-portal"  # the portal's labels (provisioning/manifests.py)
TEAM_LABEL = "gpu-portal.io/team"
BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
KSM_INSTANCE = "kube-state-metrics:8080"
SPOT_LABEL = ("karpenter.sh/capacity-type", "spot")  # what the cluster file gives spot pools
RECLAIM_GRACE = 120.0  # a reclaimed node goes this long after its notice (controllers/spot.py)
EVICTION_GRACE = 30.0  # an evicted pod is deleted after its terminationGracePeriodSeconds
XID_CRASH_AFTER = xid.CRASH_AFTER  # the pod on the GPU crashes this long after an XID
ANSWER_FIELDS = [
    "hour",
    "namespace",
    "pod",
    "job",
    "node",
    "resource",
    "gpus",
    "held_minutes",
    "gpu_minutes",
    "busy_gpu_minutes",
    "idle_gpu_minutes",
    "unobserved_gpu_minutes",
    "mean_utilisation",
    "peak_fb_used_mib",
]


class HistoryError(ValueError):
    """A bad workload file or option, worded for the person who wrote it."""


# --- parsing ---


def parse_moment(text, what: str) -> float:
    """RFC 3339 with a zone (`2026-06-01T00:00:00Z`) or a date (UTC midnight)."""
    if isinstance(text, datetime):
        moment = text
    else:
        try:
            moment = datetime.fromisoformat(str(text).strip())
        except ValueError:
            raise HistoryError(
                f"{what}: expected a time like 2026-06-01T00:00:00Z, got {text!r}"
            ) from None
    if moment.tzinfo is None:
        if len(str(text).strip()) != 10:
            raise HistoryError(f"{what}: give a zone (2026-06-01T00:00:00Z), got {text!r}")
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


_DURATION = re.compile(r"^(\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")


def parse_seconds(value, what: str, *, minimum: float = 0.0) -> float:
    """`90`, `90s`, `5m`, `1h30m`, `2d` -> seconds."""
    if isinstance(value, bool):
        raise HistoryError(f"{what}: expected a duration like 90s, 5m or 1h, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        if not _DURATION.match(text):
            raise HistoryError(f"{what}: expected a duration like 90s, 5m or 1h, got {value!r}")
        units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
        seconds = sum(
            float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
        )
    if not seconds >= minimum or seconds > 10 * 365 * 86400:
        raise HistoryError(f"{what}: must be between {minimum:g}s and 10 years, got {value!r}")
    return seconds


def _moment_or_offset(value, what: str, origin: float) -> float:
    """An absolute time, or `+2h30m` after `origin` (--from)."""
    if isinstance(value, str) and value.strip().startswith("+"):
        return origin + parse_seconds(value.strip()[1:], what)
    return parse_moment(value, what)


def _mapping(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise HistoryError(f"{what}: expected a mapping of names to strings, got {value!r}")
    return {k: str(v) for k, v in value.items()}


def _integer(value, what: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise HistoryError(f"{what}: expected a whole number {minimum}-{maximum}, got {value!r}")
    return value


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _name(value, what: str, limit: int = 63) -> str:
    if not isinstance(value, str) or len(value) > limit or not _NAME.match(value):
        raise HistoryError(
            f"{what}: must be a DNS-1123 label (lowercase letters, digits, '-', at most "
            f"{limit} characters), got {value!r}"
        )
    return value


@dataclass(frozen=True)
class Gap:
    start: float
    end: float
    job: str | None  # "dcgm", "kube-state-metrics" or None for both
    node: str | None  # one DCGM target, or all

    def covers(self, job: str, node: str | None, at: float) -> bool:
        return (
            self.start <= at < self.end
            and self.job in (None, job)
            and (self.node is None or self.node == node)
        )


@dataclass(frozen=True)
class Incident:
    """A moment of the period: the driver reports XID `xid` on GPU `gpu` of `node`, or
    the cloud reclaims the spot node `node` (its replacement joins `returns_after` after
    it goes, or never)."""

    at: float
    where: str  # "incidents[3]": errors found while playing name it
    node: str
    xid: int | None = None
    gpu: int | None = None
    returns_after: float | None = None


@dataclass(frozen=True)
class Entry:
    """One line of `workloads`: a pod (or a Job's pod) that may repeat."""

    index: int
    namespace: str
    name: str
    kind: str  # Pod | Job
    resource: str
    gpus: int
    node_selector: dict
    labels: dict
    load: runtime.GpuLoad
    annotations: dict  # the kubesim.io/ annotations the live kubelet reads
    start: float
    duration: float
    exit_code: int
    every: float
    count: int

    def runs(self) -> Iterator[Run]:
        for repeat in range(self.count):
            name = self.name if self.count == 1 else f"{self.name}-{repeat}"
            yield Run(self.start + repeat * self.every, self.index, repeat, name, self)


@dataclass(order=True)
class Run:
    start: float
    index: int
    repeat: int
    name: str = field(compare=False)
    entry: Entry = field(compare=False)


@dataclass
class Workload:
    threshold: float
    retain: float
    namespaces: dict[str, dict]  # name -> {"labels", "quota"}
    entries: list[Entry]
    gaps: list[Gap]
    incidents: list[Incident] = field(default_factory=list)

    def runs(self) -> Iterator[Run]:
        """Every run of every entry, in start order (lazily: 180 days of daily jobs for
        800 entries are never all in memory)."""
        return heapq.merge(*(entry.runs() for entry in self.entries))


def load_workload(path: str, origin: float, end: float) -> Workload:
    try:
        with open(path) as handle:
            data = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise HistoryError(f"workload file: {exc.strerror}: {path}") from None
    except yaml.YAMLError as exc:
        raise HistoryError(f"workload file: not YAML or JSON: {exc}") from None
    return parse_workload(data, origin, end)


def parse_workload(data, origin: float, end: float) -> Workload:
    if not isinstance(data, dict):
        raise HistoryError("workload file: expected a mapping with namespaces and workloads")
    known = {"threshold", "retainFinished", "namespaces", "workloads", "scrapeGaps", "incidents"}
    unknown = set(data) - known
    if unknown:
        raise HistoryError(f"workload file: unknown keys {sorted(unknown)}")
    threshold = data.get("threshold", 0.05)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise HistoryError(f"threshold: expected a ratio 0-1, got {threshold!r}")
    if not 0 <= threshold <= 1:
        raise HistoryError(f"threshold: expected a ratio 0-1, got {threshold!r}")
    retain = parse_seconds(data.get("retainFinished", "10m"), "retainFinished")

    namespaces = {}
    for i, item in enumerate(_list(data.get("namespaces"), "namespaces")):
        where = f"namespaces[{i}]"
        if not isinstance(item, dict):
            raise HistoryError(f"{where}: expected a mapping, got {item!r}")
        name = _name(item.get("name"), f"{where}.name")
        if name in namespaces:
            raise HistoryError(f"{where}.name: {name!r} is listed twice")
        labels = {"kubernetes.io/metadata.name": name}
        if item.get("team") is not None:
            team = _name(item["team"], f"{where}.team")
            labels.update({"app.kubernetes.io/managed-by": MANAGED_BY, TEAM_LABEL: team})
        labels.update(_mapping(item.get("labels"), f"{where}.labels"))
        hard = _mapping(item.get("quota"), f"{where}.quota")
        namespaces[name] = {"labels": labels, "quota": hard}

    entries = []
    seen = set()
    for i, item in enumerate(_list(data.get("workloads"), "workloads")):
        entry = _entry(i, item, namespaces, origin, end)
        key = (entry.namespace, entry.name)
        if key in seen:
            raise HistoryError(
                f"workloads[{i}].name: {entry.name!r} is used twice in its namespace"
            )
        seen.add(key)
        entries.append(entry)

    gaps = []
    for i, item in enumerate(_list(data.get("scrapeGaps"), "scrapeGaps")):
        where = f"scrapeGaps[{i}]"
        if not isinstance(item, dict):
            raise HistoryError(f"{where}: expected a mapping, got {item!r}")
        start = _moment_or_offset(item.get("from"), f"{where}.from", origin)
        stop = _moment_or_offset(item.get("to"), f"{where}.to", origin)
        if stop <= start:
            raise HistoryError(f"{where}: to must be after from")
        job = item.get("job")
        if job not in (None, "dcgm", "kube-state-metrics"):
            raise HistoryError(f"{where}.job: dcgm or kube-state-metrics, got {job!r}")
        node = item.get("node")
        if node is not None and not isinstance(node, str):
            raise HistoryError(f"{where}.node: expected a node name, got {node!r}")
        gaps.append(Gap(start, stop, job, node))
    incidents = [
        _incident(f"incidents[{i}]", item, origin, end)
        for i, item in enumerate(_list(data.get("incidents"), "incidents"))
    ]
    return Workload(threshold, retain, namespaces, entries, gaps, incidents)


def _incident(where: str, item, origin: float, end: float) -> Incident:
    if not isinstance(item, dict) or ("xid" in item) == ("reclaim" in item):
        raise HistoryError(
            f"{where}: expected {{at, xid, node, gpu}} or {{at, reclaim: NODE}}, got {item!r}"
        )
    at = _moment_or_offset(item.get("at"), f"{where}.at", origin)
    if not origin <= at < end:
        raise HistoryError(f"{where}.at: must fall within --from/--to")
    if "reclaim" in item:
        unknown = set(item) - {"at", "reclaim", "returnsAfter"}
        if unknown:
            raise HistoryError(f"{where}: unknown keys {sorted(unknown)}")
        returns = item.get("returnsAfter")
        returns = None if returns is None else parse_seconds(returns, f"{where}.returnsAfter")
        node = _name(item["reclaim"], f"{where}.reclaim")
        return Incident(at, where, node, returns_after=returns)
    unknown = set(item) - {"at", "xid", "node", "gpu"}
    if unknown:
        raise HistoryError(f"{where}: unknown keys {sorted(unknown)}")
    code = _integer(item["xid"], f"{where}.xid", 1, 999)
    gpu = _integer(item.get("gpu"), f"{where}.gpu", 0, 63)
    return Incident(at, where, _name(item.get("node"), f"{where}.node"), xid=code, gpu=gpu)


def _list(value, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise HistoryError(f"{what}: expected a list, got {value!r}")
    return value


_ENTRY_KEYS = {
    "namespace", "name", "kind", "resource", "gpus", "nodeSelector", "labels", "profile",
    "util", "idleAfter", "busyHours", "fbUsed", "start", "duration", "exitCode", "repeat",
}  # fmt: skip


def _entry(i: int, item, namespaces: dict, origin: float, end: float) -> Entry:
    where = f"workloads[{i}]"
    if not isinstance(item, dict):
        raise HistoryError(f"{where}: expected a mapping, got {item!r}")
    unknown = set(item) - _ENTRY_KEYS
    if unknown:
        raise HistoryError(f"{where}: unknown keys {sorted(unknown)}")
    namespace = item.get("namespace")
    if namespace not in namespaces:
        raise HistoryError(f"{where}.namespace: {namespace!r} is not in namespaces")
    kind = item.get("kind", "Pod")
    if kind not in ("Pod", "Job"):
        raise HistoryError(f"{where}.kind: Pod or Job, got {kind!r}")
    name = _name(item.get("name"), f"{where}.name", 50)
    resource = item.get("resource", cluster.GPU_RESOURCE)
    if not isinstance(resource, str) or not (
        resource == cluster.GPU_RESOURCE or resource.startswith(cluster.MIG_PREFIX)
    ):
        raise HistoryError(
            f"{where}.resource: nvidia.com/gpu or nvidia.com/mig-*, got {resource!r}"
        )
    gpus = _integer(item.get("gpus", 1), f"{where}.gpus", 1, 64)
    profile = item.get("profile", "busy")
    if profile not in runtime.PROFILES:
        raise HistoryError(
            f"{where}.profile: one of {', '.join(runtime.PROFILES)}, got {profile!r}"
        )
    annotations = {"kubesim.io/gpu-profile": profile}
    load = {"profile": profile}
    if item.get("util") is not None:
        util = item["util"]
        if isinstance(util, bool) or not isinstance(util, int | float) or not 0 <= util <= 100:
            raise HistoryError(f"{where}.util: a percentage 0-100, got {util!r}")
        load["level"] = util / 100
        annotations["kubesim.io/gpu-util"] = go_float(util)
    if item.get("idleAfter") is not None:
        load["idle_after"] = parse_seconds(item["idleAfter"], f"{where}.idleAfter")
        annotations["kubesim.io/gpu-idle-after"] = f"{int(load['idle_after'])}s"
    if item.get("busyHours") is not None:
        try:
            load["busy_hours"] = runtime.parse_hours(str(item["busyHours"]))
        except ValueError as exc:
            raise HistoryError(f"{where}.busyHours: {exc}") from None
        annotations["kubesim.io/gpu-busy-hours"] = str(item["busyHours"])
    if item.get("fbUsed") is not None:
        load["fb_used_mib"] = _integer(item["fbUsed"], f"{where}.fbUsed", 0, 10**7)
        annotations["kubesim.io/gpu-fb-used"] = str(load["fb_used_mib"])
    start = _moment_or_offset(item.get("start", "+0s"), f"{where}.start", origin)
    if not origin <= start < end:
        raise HistoryError(f"{where}.start: must fall within --from/--to")
    duration = parse_seconds(item.get("duration"), f"{where}.duration", minimum=1)
    exit_code = _integer(item.get("exitCode", 0), f"{where}.exitCode", 0, 255)
    repeat = item.get("repeat") or {}
    if not isinstance(repeat, dict) or set(repeat) - {"every", "count"}:
        raise HistoryError(f"{where}.repeat: expected {{every: 1d, count: N}}, got {repeat!r}")
    count = _integer(repeat.get("count", 1), f"{where}.repeat.count", 1, 100_000)
    every = parse_seconds(repeat.get("every", "1d"), f"{where}.repeat.every", minimum=1)
    return Entry(
        index=i,
        namespace=namespace,
        name=name,
        kind=kind,
        resource=resource,
        gpus=gpus,
        node_selector=_mapping(item.get("nodeSelector"), f"{where}.nodeSelector"),
        labels=_mapping(item.get("labels"), f"{where}.labels"),
        load=runtime.GpuLoad(**load),
        annotations=annotations,
        start=start,
        duration=duration,
        exit_code=exit_code,
        every=every,
        count=count,
    )


# --- objects as the API would hold them ---


def _uid(*parts) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kubesim-history/" + "/".join(map(str, parts))))


def _when(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _template(run: Run, namespace_labels: dict) -> dict:
    entry = run.entry
    count = str(entry.gpus)
    team = namespace_labels.get(TEAM_LABEL)
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY, TEAM_LABEL: team} if team else {}
    labels.update(entry.labels)
    return {
        "metadata": {
            "labels": labels,
            "annotations": {
                **entry.annotations,
                "kubesim.io/duration": f"{entry.duration:.3f}".rstrip("0").rstrip(".") + "s",
                "kubesim.io/exit-code": str(entry.exit_code),
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": dict(entry.node_selector),
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "limits": {entry.resource: count},
                        "requests": {entry.resource: count},
                    },
                }
            ],
        },
    }


@dataclass
class Live:
    """One run while its objects exist: a pod (and its Job)."""

    run: Run
    pod: dict
    job: dict | None
    created: float
    devices: list = field(default_factory=list)
    prefixes: dict = field(default_factory=dict)  # device key -> DCGM series prefixes
    node: dict | None = None
    started: float | None = None
    ends: float | None = None
    gone: float | None = None  # when the objects are deleted
    # Cut short by an incident: its status then (pod, time) -> status, and how long the
    # pod stays listed after.
    ending: object = None
    kept: float | None = None


def _new_live(run: Run, namespace_labels: dict, at: float) -> Live:
    entry = run.entry
    stamp = format_time(_when(at))
    template = _template(run, namespace_labels)
    job = None
    if entry.kind == "Job":
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": run.name,
                "namespace": entry.namespace,
                "uid": _uid(entry.namespace, "job", run.name),
                "labels": dict(template["metadata"]["labels"]),
                "creationTimestamp": stamp,
            },
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": template,
            },
        }
        rng = random.Random(f"{entry.namespace}/{run.name}")
        pod = jobs.pod_from_template(job, jobs.pod_name(run.name, rng))
    else:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": run.name, **template["metadata"]},
        }
        pod["spec"] = template["spec"]
    pod["metadata"].update(
        namespace=entry.namespace,
        uid=_uid(entry.namespace, "pod", pod["metadata"]["name"]),
        creationTimestamp=stamp,
    )
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    # The Job's status is made when it is first needed: most runs are placed in the
    # step they are created in, and reconciling twice would be wasted.
    return Live(run=run, pod=pod, job=job, created=at)


def _sync_job(live: Live, at: float) -> None:
    if live.job is not None:
        status = jobs.reconcile(live.job, [live.pod], _when(at)).status
        live.job = {**live.job, "status": status}


# --- the simulation ---


class Cluster:
    """Nodes and their free devices; places pods as the scheduler would (first node by
    name that matches the selector, is not cordoned and has enough free healthy devices,
    lowest index first)."""

    def __init__(self, nodes: list[dict], boot: float):
        self.nodes: list[dict] = []
        self.devices: dict[str, list] = {}
        self.physical: dict[str, list] = {}
        self.boot: dict[str, float] = {}  # node -> when it booted (DCGM's energy counter)
        self.taken: set[str] = set()
        self.unhealthy: set[str] = set()  # device keys the device plugin reports unhealthy
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

    def place(self, pod: dict, resource: str, gpus: int):
        for node in self.nodes:
            if node["metadata"]["name"] in self.cordoned:
                continue
            if not scheduler.matches_node_selector(pod, node):
                continue
            free = [
                d
                for d in self.devices[node["metadata"]["name"]]
                if d.resource == resource
                and d.key not in self.taken
                and d.key not in self.unhealthy
            ]
            if len(free) >= gpus:
                chosen = free[:gpus]
                self.taken.update(d.key for d in chosen)
                return node, chosen
        return None, []

    def release(self, devices) -> None:
        self.taken.difference_update(d.key for d in devices)


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


class Spools:
    """One temporary file per family while the steps run; `finish` concatenates them
    into OpenMetrics (families must not interleave)."""

    def __init__(self, out: str, families: list, selected):
        self.out = out
        directory = os.path.dirname(os.path.abspath(out))
        self.tmp = tempfile.TemporaryDirectory(prefix=".kubesim-history-", dir=directory)
        self.families = [f for f in families if selected(f.name)]
        self.files = {
            family.name: open(  # noqa: SIM115 (closed in finish)
                os.path.join(self.tmp.name, family.name), "w", buffering=1 << 20
            )
            for family in self.families
        }
        self.lines = 0

    def write(self, family: str, text: str, lines: int) -> None:
        handle = self.files.get(family)
        if handle is not None and lines:
            handle.write(text)
            self.lines += lines

    def finish(self, out: str) -> None:
        tmp_out = out + ".tmp"
        with open(tmp_out, "wb") as target:
            for family in self.families:
                self.files[family.name].close()
                # OpenMetrics wants counters named *_total; DCGM's are not, so they are
                # declared `unknown`: the series and values stay those of a scrape.
                kind = family.kind if family.kind == "gauge" else "unknown"
                header = f"# HELP {family.name} {family.help}\n# TYPE {family.name} {kind}\n"
                target.write(header.encode())
                spool = os.path.join(self.tmp.name, family.name)
                with open(spool, "rb") as source:
                    shutil.copyfileobj(source, target, 1 << 22)
                os.remove(spool)  # the disk holds the output plus one family, not twice it
            target.write(b"# EOF\n")
        os.replace(tmp_out, out)
        self.tmp.cleanup()

    def abort(self) -> None:
        for handle in self.files.values():
            handle.close()
        self.tmp.cleanup()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.out + ".tmp")

    def step(self, at: float) -> None:
        """Called before each step's samples (a whole file has no parts to close)."""


class SplitSpools:
    """`--split`: one OpenMetrics file per `split` seconds of history (aligned to the
    epoch, as promtool aligns its blocks), OUT.000, OUT.001 ..., each written whole
    as soon as its last step is played and announced on stdout as a JSON line, so a
    loader can turn it into a block while the next is generated. promtool parses its
    whole input once per block it writes: a file per block is parsed once."""

    def __init__(self, out: str, families: list, selected, split: float, announce=print):
        self.out, self.families, self.selected = out, families, selected
        self.split, self.announce = split, announce
        self.current: Spools | None = None
        self.boundary = None
        self.paths: list[str] = []
        self.lines = 0

    def _path(self) -> str:
        return f"{self.out}.{len(self.paths):03d}"

    def step(self, at: float) -> None:
        if self.current is not None and at < self.boundary:
            return
        self._close()
        self.boundary = (at // self.split + 1) * self.split
        self.current = Spools(self._path(), self.families, self.selected)

    def write(self, family: str, text: str, lines: int) -> None:
        self.current.write(family, text, lines)

    def _close(self) -> None:
        if self.current is None:
            return
        path = self._path()
        self.current.finish(path)
        self.lines += self.current.lines
        self.paths.append(path)
        self.current = None
        self.announce(json.dumps({"written": path, "until": format_time(_when(self.boundary))}))

    def finish(self, out: str) -> None:
        self._close()

    def abort(self) -> None:
        if self.current is not None:
            self.current.abort()
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


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
                "metadata": {"name": name, "labels": spec["labels"], "uid": _uid("ns", name)},
                "status": {"phase": "Active"},
            }
            for name, spec in workload.namespaces.items()
        }
        self.live: dict[tuple, Live] = {}  # (namespace, pod name) -> run alive now
        self.pending: list[Live] = []
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
        live = _new_live(run, namespace["labels"], at)
        self.live[(run.entry.namespace, live.pod["metadata"]["name"])] = live
        self.pending.append(live)
        self._changed(run.entry.namespace)

    def _schedule(self, at: float) -> None:
        still = []
        for live in self.pending:
            entry = live.run.entry
            node, devices = self.cluster.place(live.pod, entry.resource, entry.gpus)
            if node is None:
                still.append(live)
                continue
            pod = live.pod
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            annotations = pod["metadata"]["annotations"]
            annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
            live.pod = {**pod, "status": runtime.running_status(pod, node, _when(at))}
            live.node, live.devices = node, devices
            live.started, live.ends = at, at + entry.duration
            _sync_job(live, at)
            self._changed(entry.namespace)
        self.pending = still

    def _finish(self, at: float) -> None:
        for key, live in list(self.live.items()):
            if live.ends is not None and live.gone is None and at >= live.ends:
                ending = live.ending or runtime.next_status
                live.pod = {**live.pod, "status": ending(live.pod, _when(live.ends))}
                _sync_job(live, live.ends)
                self.cluster.release(live.devices)
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

    def _node_at(self, incident: Incident, when: float) -> dict:
        node = self.cluster.node(incident.node)
        if node is None:
            gone = "was reclaimed before" if incident.node in self.cluster.gone else "is not in"
            raise HistoryError(
                f"{incident.where}: node {incident.node!r} {gone} the cluster at "
                f"{format_time(_when(when))}"
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
            "annotations": xid.with_event(node, gpu, code, format_time(_when(when))),
        }
        status = (
            node["status"]
            if allocatable is None
            else {**node["status"], "allocatable": allocatable}
        )
        if allocatable is not None:
            self.cluster.unhealthy.update(d.key for d in devices)
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
        node = lifecycle.replacement_node(old, name, format_time(_when(when)))
        node["metadata"].update(creationTimestamp=format_time(_when(when)), uid=_uid("node", name))
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
                _sync_job(live, live.created)  # a Job whose pod is still Pending
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
                    "hour": format_time(_when(hour * 3600)),
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


# --- answer files ---


class _AnswerFile:
    handle = None
    path = ""

    def abort(self) -> None:
        if self.handle is not None:
            self.handle.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path + ".tmp")


class JsonAnswer(_AnswerFile):
    def __init__(self, path: str, meta: dict):
        self.handle = open(path + ".tmp", "w")  # noqa: SIM115 (closed in close)
        self.path = path
        head = json.dumps(meta)[:-1]
        self.handle.write(head + ', "rows": [\n')
        self.first = True
        self.count = 0

    def write(self, row: dict) -> None:
        self.handle.write(("" if self.first else ",\n") + json.dumps(row))
        self.first = False
        self.count += 1

    def close(self) -> None:
        self.handle.write("\n]}\n")
        self.handle.close()
        os.replace(self.path + ".tmp", self.path)


class CsvAnswer(_AnswerFile):
    def __init__(self, path: str, meta: dict):
        self.handle = open(path + ".tmp", "w", newline="")  # noqa: SIM115 (closed in close)
        self.path = path
        self.writer = csv.DictWriter(self.handle, fieldnames=ANSWER_FIELDS)
        self.writer.writeheader()
        self.count = 0

    def write(self, row: dict) -> None:
        self.writer.writerow({k: "" if v is None else v for k, v in row.items()})
        self.count += 1

    def close(self) -> None:
        self.handle.close()
        os.replace(self.path + ".tmp", self.path)


def generate(
    *,
    cluster_path: str,
    workload_path: str,
    start: float,
    end: float,
    out: str,
    step: float = 60.0,
    answer_path: str | None = None,
    threshold: float | None = None,
    metrics: str | None = None,
    allowlist: dict | None = None,
    dcgm_honor_labels: bool = False,
    split: float | None = None,
) -> dict:
    """Write the OpenMetrics history (one file, or one per `split` seconds) and the
    answer; return a summary."""
    if end <= start:
        raise HistoryError("--to must be after --from")
    try:
        nodes = cluster.build_nodes(cluster.load(cluster_path))
    except (OSError, cluster.ClusterFileError, yaml.YAMLError) as exc:
        raise HistoryError(f"cluster file: {exc}") from None
    boot = format_time(_when(start))
    for node in nodes:
        node["metadata"]["creationTimestamp"] = boot
        node["metadata"]["uid"] = _uid("node", node["metadata"]["name"])
    workload = load_workload(workload_path, start, end)
    if threshold is not None:
        workload.threshold = threshold
    try:
        pattern = re.compile(metrics) if metrics else None
    except re.error as exc:
        raise HistoryError(f"--metrics: not a regular expression: {exc}") from None
    selected = (lambda name: bool(pattern.fullmatch(name))) if pattern else (lambda name: True)
    answer_path = answer_path or os.path.splitext(out)[0] + ".answer.json"
    meta = {
        "from": format_time(_when(start)),
        "to": format_time(_when(end)),
        "step_seconds": step,
        "threshold": workload.threshold,
        "busy_metric": BUSY_METRIC,
    }
    spools = answer = None
    began = time.monotonic()
    try:
        families = ksm.FAMILIES + dcgm.FAMILIES
        if split:
            announce = lambda line: print(line, flush=True)  # noqa: E731
            spools = SplitSpools(out, families, selected, split, announce)
        else:
            spools = Spools(out, families, selected)
        answer = (CsvAnswer if answer_path.endswith(".csv") else JsonAnswer)(answer_path, meta)
        history = History(nodes, workload, start, end, step, allowlist, dcgm_honor_labels, selected)
        history.play(spools, answer)
        spools.finish(out)
        answer.close()
    except BaseException:
        # Nothing half-written: no output, no answer, no spools.
        for partial in (spools, answer):
            if partial is not None:
                partial.abort()
        raise
    summary = {
        "samples": spools.lines,
        "answer_rows": answer.count,
        "seconds": round(time.monotonic() - began, 2),
        "out": out,
        "answer": answer_path,
    }
    if split:
        summary["files"] = spools.paths
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubesim history",
        description="Write Prometheus history (OpenMetrics) and its exact answer for a workload.",
    )
    parser.add_argument("--cluster", required=True, help="cluster file (YAML)")
    parser.add_argument("--workload", required=True, help="workload file (YAML or JSON)")
    parser.add_argument("--from", dest="start", required=True, help="first sample, RFC 3339")
    parser.add_argument("--to", dest="end", required=True, help="end (excluded), RFC 3339")
    parser.add_argument("--out", required=True, help="OpenMetrics file to write")
    parser.add_argument("--step", default="60s", help="time between samples (default 60s)")
    parser.add_argument("--answer", help="answer file, .json or .csv (default OUT.answer.json)")
    parser.add_argument(
        "--split",
        help="write OUT.000, OUT.001 ... each SPLIT long (e.g. 24h, aligned to the epoch), "
        "each announced on stdout as it is done",
    )
    parser.add_argument("--threshold", type=float, help="busy at or above this ratio")
    parser.add_argument("--metrics", help="only families whose name matches this regex")
    parser.add_argument(
        "--metric-labels-allowlist", help="kube-state-metrics allowlist (see python -m kubesim -h)"
    )
    parser.add_argument(
        "--dcgm-honor-labels",
        action="store_true",
        help="store DCGM's namespace/pod/container as scraped with honor_labels: true "
        "(default: exported_namespace/exported_pod/exported_container, as without it)",
    )
    args = parser.parse_args(argv)
    try:
        allowlist = None
        if args.metric_labels_allowlist is not None:
            allowlist = ksm.parse_allowlist(args.metric_labels_allowlist)
        if args.threshold is not None and not 0 <= args.threshold <= 1:
            raise HistoryError(f"--threshold: expected a ratio 0-1, got {args.threshold}")
        summary = generate(
            cluster_path=args.cluster,
            workload_path=args.workload,
            start=parse_moment(args.start, "--from"),
            end=parse_moment(args.end, "--to"),
            out=args.out,
            step=parse_seconds(args.step, "--step", minimum=1),
            answer_path=args.answer,
            threshold=args.threshold,
            metrics=args.metrics,
            allowlist=allowlist,
            dcgm_honor_labels=args.dcgm_honor_labels,
            split=parse_seconds(args.split, "--split", minimum=60) if args.split else None,
        )
    except (HistoryError, ValueError) as exc:
        print(f"python -m kubesim history: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"python -m kubesim history: error: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(summary))
    return 0
