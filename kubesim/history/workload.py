"""The workload file (YAML or JSON) parsed into runs, incidents and gaps, with
errors worded for the person who wrote it."""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import yaml

from kubesim import cluster
from kubesim.exposition import go_float
from kubesim.kubelet import runtime


class HistoryError(ValueError):
    """A bad workload file or option, worded for the person who wrote it."""


MANAGED_BY = "gpu-portal"  # the portal's labels (provisioning/manifests.py)
TEAM_LABEL = "gpu-portal.io/team"


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


def as_datetime(at: float) -> datetime:
    """Seconds since the epoch (the workload's moments) as a UTC datetime."""
    return datetime.fromtimestamp(at, UTC)
