"""One closed hour of Prometheus data turned into ledger rows.

`fetch_hour` asks Prometheus eight cluster-wide questions (five range queries
at the sample step, three instant queries at the hour's end; two more range
queries when pods held DRA devices); `measure` is a
pure function of their answers; `billing.actions.ingest_hour` writes the rows.

Range queries, not subqueries: each is evaluated at every step of
[hour, hour + 1 h) (the XIDs from a few minutes before it) and wraps raw
samples in `last_over_time(x[step - 1ms])`, so a step sees only a sample
scraped within that step. That keeps
backfilled data (no staleness markers) from lingering five minutes past a
pod's end, and makes a scrape gap a gap (unmetered), not an echo of the
sample before it.
"""

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings

from billing import prometheus
from cluster import inventory
from cluster.models import Flavor

HISTOGRAM_BANDS = 100  # 1 % each


def sanitize(resource_name):
    """kube-state-metrics' spelling of a resource name (nvidia.com/gpu -> nvidia_com_gpu)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource_name)


def _regex(values):
    return "|".join(re.escape(value) for value in sorted(values)) or "^$"


# kube-state-metrics' owner families and the label naming each object: a pod's
# owner, a ReplicaSet's (its Deployment) and a Job's (its CronJob).
OWNER_FAMILIES = (
    ("kube_pod_owner", "pod"),
    ("kube_replicaset_owner", "replicaset"),
    ("kube_job_owner", "job_name"),
)


def owners_query(window=None, match=""):
    """The PromQL of who owns every pod, ReplicaSet and Job (`Owners` reads its
    answer): the three families joined with `or` (their label sets differ), over
    the last `window` when given, limited by the label `match` when given."""
    parts = []
    for family, key in OWNER_FAMILIES:
        series = f"{family}{{{match}}}" if match else family
        if window:
            series = f"last_over_time({series}[{window}])"
        parts.append(f"max by (namespace, {key}, owner_kind, owner_name) ({series})")
    return " or ".join(parts)


NO_OWNER = ("", "<none>")


class Owners:
    """The one rule naming a pod's workload by what its owner knows: Pod ->
    ReplicaSet -> Deployment, Pod -> StatefulSet, Pod -> Job -> CronJob, else the
    pod itself, from kube-state-metrics' owner series (`owners_query`). A
    ReplicaSet or Job whose owner is not in the series stays what it is."""

    def __init__(self, series):
        self.owner = {}  # (label, namespace, name) -> (owner kind, owner name)
        for each in series:
            labels = each.labels
            for _, key in OWNER_FAMILIES:
                if key in labels:
                    self.owner[(key, labels.get("namespace", ""), labels[key])] = (
                        labels.get("owner_kind", ""),
                        labels.get("owner_name", ""),
                    )
                    break

    def _of(self, key, namespace, name):
        kind, owner = self.owner.get((key, namespace, name), NO_OWNER)
        return None if kind in NO_OWNER or owner in NO_OWNER else (kind, owner)

    def workload(self, namespace, pod):
        """(kind, name) of the workload `pod` of `namespace` belongs to."""
        owner = self._of("pod", namespace, pod)
        if owner is None:
            return "Pod", pod
        up = {"ReplicaSet": "replicaset", "Job": "job_name"}.get(owner[0])
        return (up and self._of(up, namespace, owner[1])) or owner


OWNERS = owners_query("1h")
STARTS = "max by (namespace, pod, uid) (last_over_time(kube_pod_start_time[1h]))"
# An XID shows up to this long before the pod it kills is seen failing: the
# application fails at its next CUDA call (kubesim waits 30 s) and the exporter
# collects every 30 s.
XID_LEAD = 120
# XIDs the device plugin puts down to the application (k8s-device-plugin's
# health check skips them): the GPU is fine, the lost run is not credited.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})


def queries(resources, step=None, allocations=()):
    """The PromQL of one hour, by name, for the sanitised `resources` of the catalog.

    kube-state-metrics is read with its own label names (scraped with
    honor_labels, as usual) except `node` (a setting); the exporter's pod and
    namespace labels are settings, since scraping it without honor_labels
    renames them `exported_pod` and `exported_namespace`.
    """
    step = step or settings.PORTAL_BILLING_STEP
    window = f"{step * 1000 - 1}ms"
    pod = settings.PORTAL_BILLING_LABEL_POD
    node = settings.PORTAL_BILLING_LABEL_NODE
    hostname = settings.PORTAL_BILLING_LABEL_HOSTNAME
    wanted = _regex(resources)
    return {
        # GPUs requested by running pods, per pod, node and resource.
        "allocation": (
            f"sum by (namespace, pod, uid, {node}, resource) (last_over_time("
            f'kube_pod_container_resource_requests{{unit="integer",resource=~"{wanted}"}}'
            f"[{window}]))"
            " * on (namespace, pod, uid) group_left () "
            "(max by (namespace, pod, uid) (last_over_time("
            f'kube_pod_status_phase{{phase="Running"}}[{window}])) == 1)'
        ),
        # Engine activity 0-1 of every device a pod holds; GPU_UTIL where the
        # profiling field is missing, never on MIG (it reads 0 there).
        "activity": (
            f'last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{pod}!=""}}[{window}])'
            f' or last_over_time(DCGM_FI_DEV_GPU_UTIL{{{pod}!="",GPU_I_PROFILE=""}}[{window}])'
            " / 100"
        ),
        "framebuffer": f'last_over_time(DCGM_FI_DEV_FB_USED{{{pod}!=""}}[{window}])',
        "capacity": (
            f"sum by ({node}, resource) (last_over_time("
            f'kube_node_status_allocatable{{resource=~"{wanted}"}}[{window}]))'
        ),
        # The last XID of every GPU (a gauge holding the code), pods or not.
        "xid": f"max by ({hostname}, gpu) (last_over_time(DCGM_FI_DEV_XID_ERRORS[{window}]))",
        # Instant, at the hour's end: who owns each pod, when each started, and
        # the nodes' labels.
        "owners": OWNERS,
        "starts": STARTS,
        "node_labels": "last_over_time(kube_node_labels[1h])",
        **(dra_queries(allocations, window) if allocations else {}),
    }


def dra_queries(allocations, window):
    """For pods holding DRA devices (`allocations`, cluster.DraAllocation rows):
    when each ran, and the activity of every device on their nodes, by device,
    whoever the exporter says holds it."""
    hostname = settings.PORTAL_BILLING_LABEL_HOSTNAME
    uids = _quoted(_regex({a.pod_uid for a in allocations}))
    nodes = _quoted(_regex({a.node for a in allocations}))
    return {
        "dra_running": (
            "max by (namespace, pod, uid) (last_over_time("
            f'kube_pod_status_phase{{phase="Running",uid=~{uids}}}[{window}])) == 1'
        ),
        "dra_activity": (
            f"last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{hostname}=~{nodes}}}[{window}])"
            f' or last_over_time(DCGM_FI_DEV_GPU_UTIL{{{hostname}=~{nodes},GPU_I_PROFILE=""}}'
            f"[{window}]) / 100"
        ),
    }


RANGE_QUERIES = (
    "allocation",
    "activity",
    "framebuffer",
    "capacity",
    "xid",
    "dra_running",
    "dra_activity",
)


def fetch_hour(hour, flavors, step=None, allocations=()):
    """{name: [Series]} for the hour starting at `hour` (two more range queries
    when pods held DRA devices). Raises PrometheusError."""
    step = step or settings.PORTAL_BILLING_STEP
    texts = queries({sanitize(f.resource_name) for f in flavors}, step, allocations)
    last_step = hour + timedelta(seconds=3600 - step)
    end = hour + timedelta(hours=1)
    answers = {}
    for name, promql in texts.items():
        if name == "xid":
            # From before the hour: what a GPU read before an XID that killed a pod
            # early in the hour tells it from an old one.
            before = step * (1 + -(-XID_LEAD // step))
            answers[name] = prometheus.query_range(
                promql, hour - timedelta(seconds=before), last_step, step
            )
        elif name in RANGE_QUERIES:
            answers[name] = prometheus.query_range(promql, hour, last_step, step)
        else:
            answers[name] = prometheus.query(promql, at=end)
    return answers


# --- the pure part ---


@dataclass
class Figures:
    allocated: int = 0
    active: int = 0
    idle: int = 0
    unmetered: int = 0
    spot: int = 0  # of allocated, on spot nodes
    dra: int = 0  # of allocated, attributed from DRA claims' allocations


@dataclass
class Workload(Figures):
    gpus: int = 0
    activity_total: float = 0.0
    samples: int = 0
    histogram: dict = field(default_factory=dict)  # band (str) -> metered device-steps
    fb_peak: float | None = None

    @property
    def activity_mean(self):
        return self.activity_total / self.samples if self.samples else None


@dataclass(frozen=True, order=True)
class Lost:
    """A run of a team's pod lost inside the hour: credited on the ledger rows of
    the hours it ran (billing.actions)."""

    team_id: int
    namespace: str
    kind: str
    name: str
    flavor_id: int
    pod: str
    uid: str
    started: float  # unix seconds: kube_pod_start_time, else its first running step
    ended: float  # the end of its last running step
    gpus: int
    cause: str  # "reclaim" or "xid" (billing.models.LostRun.Cause)


@dataclass
class Measured:
    team: dict  # (team_id, flavor_id) -> Figures
    workload: dict  # (team_id, namespace, kind, name, flavor_id) -> Workload
    other: dict  # flavor_id -> Figures (namespaces of no team)
    capacity: dict  # flavor_id -> GPU-seconds (only flavors with node series)
    spot_capacity: dict = field(default_factory=dict)  # flavor_id -> of those, on spot nodes
    lost: list = field(default_factory=list)  # [Lost] of the hour


class FlavorResolver:
    """Which flavor a (resource, node) is, by the inventory's one rule
    (`cluster.inventory.node_serves_flavor`) applied to the node's labels as
    kube-state-metrics exports them (`label_<sanitised key>`)."""

    def __init__(self, flavors, node_labels):
        self.by_resource = defaultdict(list)
        for flavor in sorted(flavors, key=lambda f: f.pk):
            self.by_resource[sanitize(flavor.resource_name)].append(flavor)
        self.node_labels = node_labels  # node -> {label_<sanitised key>: value}
        self.cache = {}

    def __call__(self, resource, node):
        key = (resource, node)
        if key not in self.cache:
            self.cache[key] = self._resolve(resource, node)
        return self.cache[key]

    def is_spot(self, node):
        exported = self.node_labels.get(node, {})
        labels = {key: exported.get("label_" + sanitize(key), "") for key in inventory.SPOT_LABELS}
        return inventory.is_spot({"metadata": {"labels": labels}})

    def _resolve(self, resource, node):
        candidates = self.by_resource.get(resource, [])
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        exported = self.node_labels.get(node, {})
        keys = {key for flavor in candidates for key in (flavor.node_selector or {})}
        labels = {
            key: exported["label_" + sanitize(key)]
            for key in keys
            if "label_" + sanitize(key) in exported
        }
        as_node = {
            "metadata": {"name": node, "labels": labels},
            "status": {"allocatable": {candidates[0].resource_name: "1"}},
        }
        served = inventory.node_flavors(as_node, candidates)
        # Labels not exported (kube-state-metrics' allowlist): the first flavor.
        return served[0] if served else candidates[0]


def _device_key(labels):
    hostname = labels.get(settings.PORTAL_BILLING_LABEL_HOSTNAME, "")
    return (hostname, labels.get("gpu", ""), labels.get("GPU_I_ID", ""))


def _by_pod(series_list, ns_label, pod_label):
    """(namespace, pod) -> [(device key, MIG profile, {timestamp: value})]."""
    found = defaultdict(list)
    for series in series_list:
        labels = series.labels
        found[(labels.get(ns_label, ""), labels.get(pod_label, ""))].append(
            (_device_key(labels), labels.get("GPU_I_PROFILE", ""), dict(series.points))
        )
    return found


def _matches_resource(profile, resource):
    """A MIG device goes with its mig-<profile> resource, a whole GPU with the others."""
    if profile:
        return resource.endswith("_mig_" + sanitize(profile))
    return "_mig_" not in resource


def _devices(by_pod, namespace, pod, resource):
    return [d for d in by_pod.get((namespace, pod), []) if _matches_resource(d[1], resource)]


def measure(
    answers,
    flavors,
    teams_by_namespace,
    step,
    threshold,
    *,
    hour=None,
    reclaimed=(),
    allocations=(),
):
    """Ledger figures of one hour from `fetch_hour`'s answers (no I/O).

    `hour` (its start) lets a kube-state-metrics scrape gap be told from idle
    capacity; `reclaimed` are the uids of pods lost to spot reclaims (the
    batch app records them); `allocations` the DRA devices claims gave pods
    (cluster.DraAllocation rows, or anything with their fields).
    """
    ns_label = settings.PORTAL_BILLING_LABEL_NAMESPACE
    pod_label = settings.PORTAL_BILLING_LABEL_POD
    node_label = settings.PORTAL_BILLING_LABEL_NODE
    node_labels = {s.labels.get(node_label, ""): s.labels for s in answers.get("node_labels", [])}
    resolve = FlavorResolver(flavors, node_labels)
    owners = Owners(answers.get("owners", []))
    starts = {
        (s.labels.get("namespace", ""), s.labels.get("pod", ""), s.labels.get("uid", "")): (
            s.points[0][1] if s.points else None
        )
        for s in answers.get("starts", [])
    }
    xids = {_device_key(s.labels)[:2]: dict(s.points) for s in answers.get("xid", [])}
    activity = _by_pod(answers.get("activity", []), ns_label, pod_label)
    framebuffer = _by_pod(answers.get("framebuffer", []), ns_label, pod_label)
    threshold = float(threshold)
    # Steps kube-state-metrics was scraped at: those with the nodes' allocatable, or a
    # running pod's requests (a --metric-allowlist or --resources may leave the node
    # families out; the pods' are what billing cannot do without).
    listed = {t for s in answers.get("capacity", []) for t, _ in s.points}
    listed |= {t for s in answers.get("allocation", []) for t, _ in s.points}
    listed |= {t for s in answers.get("dra_running", []) for t, _ in s.points}
    steps = [] if hour is None else [hour.timestamp() + i * step for i in range(3600 // step)]
    gaps = [t for t in steps if t not in listed]

    team, workload, other = defaultdict(Figures), defaultdict(Workload), defaultdict(Figures)
    lost_runs = []

    def targets(namespace, pod, flavor):
        team_id = teams_by_namespace.get(namespace)
        if team_id is None:
            return other[flavor.pk], None
        kind, name = owners.workload(namespace, pod)
        return team[(team_id, flavor.pk)], workload[(team_id, namespace, kind, name, flavor.pk)]

    pods = {}  # (namespace, pod) -> (resource, node): what kube-state-metrics said
    counted = set()  # (namespace, pod, timestamp): steps counted from the pod's requests
    for series in answers.get("allocation", []):
        labels = series.labels
        namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
        resource = labels.get("resource", "")
        node = labels.get(node_label, "")
        pods[(namespace, pod)] = (resource, node)
        counted.update((namespace, pod, timestamp) for timestamp, _ in series.points)
        flavor = resolve(resource, node)
        if flavor is None:
            continue
        spot = resolve.is_spot(node)
        time_sliced = flavor.sharing == Flavor.Sharing.TIME_SLICED
        devices = _devices(activity, namespace, pod, resource)
        memories = _devices(framebuffer, namespace, pod, resource)
        totals, load = targets(namespace, pod, flavor)
        running = []
        for timestamp, value in series.points:
            requested = int(value)
            if requested <= 0:
                continue
            running.append((timestamp, requested))
            # One sample per device; a device copied to several pods (time-
            # slicing) is counted once per pod's share, never once per copy.
            samples = {key: values[timestamp] for key, _, values in devices if timestamp in values}
            readings = sorted(samples.values(), reverse=True)
            if time_sliced and readings:
                # Shares of one device: all metered, busy as the device is.
                metered = requested
                busy_share = sum(r >= threshold for r in readings) / len(readings)
                active = round(requested * busy_share)
                readings = readings[:1] * requested
            else:
                readings = readings[:requested]
                metered = len(readings)
                active = sum(r >= threshold for r in readings)
            idle, unmetered = (metered - active) * step, (requested - metered) * step
            _add(totals, load, requested * step, active * step, idle, spot, unmetered)
            if load is None:
                continue
            load.gpus = max(load.gpus, requested)
            _read(
                load,
                readings,
                [values[timestamp] for _, _, values in memories if timestamp in values],
            )
        end = _lost_run(running, steps, listed, step)
        if end is not None:
            uid = labels.get("uid", "")
            gpus = {key[:2] for key, _, _ in devices}
            if uid in reclaimed or _hit_by_xid(gpus, xids, end, step):
                started = starts.get((namespace, pod, uid)) or running[0][0]
                team_id = teams_by_namespace.get(namespace)
                if team_id is not None:
                    kind, name = owners.workload(namespace, pod)
                    cause = "reclaim" if uid in reclaimed else "xid"
                    lost_runs.append(
                        Lost(
                            team_id,
                            namespace,
                            kind,
                            name,
                            flavor.pk,
                            pod,
                            uid,
                            float(min(started, end[0])),
                            float(end[0]),
                            running[-1][1],
                            cause,
                        )
                    )

    _measure_dra(answers, allocations, flavors, resolve, targets, step, threshold)

    # A kube-state-metrics gap: requests and phases are unknown, but the exporter
    # still names the pod holding each device (it reads the kubelet's
    # pod-resources API). Each such device-step is allocated and unmetered, unless
    # kube-state-metrics listed the pod at that step after all: a pod is never
    # counted twice, whatever series are missing.
    gap_steps = set(gaps)
    offered = defaultdict(set)  # node -> the resources it offers
    for series in answers.get("capacity", []):
        offered[series.labels.get(node_label, "")].add(series.labels.get("resource", ""))
    held = defaultdict(set)  # (namespace, pod, resource, node, timestamp) -> device keys
    for (namespace, pod), found in activity.items():
        for key, profile, values in found:
            node = key[0]
            resource = _resource_of(profile, pods.get((namespace, pod)), offered.get(node, ()))
            for timestamp in gap_steps.intersection(values):
                if (namespace, pod, timestamp) not in counted:
                    held[(namespace, pod, resource, node, timestamp)].add(key)
    for (namespace, pod, resource, node, _), keys in held.items():
        flavor = resolve(resource, node)
        if flavor is None:
            continue
        totals, load = targets(namespace, pod, flavor)
        _add(
            totals, load, len(keys) * step, 0, 0, resolve.is_spot(node), unmetered=len(keys) * step
        )
        if load is not None:
            load.gpus = max(load.gpus, len(keys))

    capacity, spot_capacity = defaultdict(int), defaultdict(int)
    for series in answers.get("capacity", []):
        node = series.labels.get(node_label, "")
        flavor = resolve(series.labels.get("resource", ""), node)
        if flavor is not None:
            seconds = int((sum(v for _, v in series.points) + _carried(series.points, gaps)) * step)
            capacity[flavor.pk] += seconds
            if resolve.is_spot(node):
                spot_capacity[flavor.pk] += seconds
    return Measured(
        dict(team),
        dict(workload),
        dict(other),
        dict(capacity),
        dict(spot_capacity),
        sorted(lost_runs),
    )


def _measure_dra(answers, allocations, flavors, resolve, targets, step, threshold):
    """Pods holding DRA devices: each running step (kube-state-metrics' phase, by
    the pod's uid) counts the devices its claims were allocated, split active or
    idle by each device's own series (the exporter's Hostname, gpu, GPU_I_ID),
    whatever pod the exporter names on it, or none. The phase's steps are
    kube-state-metrics' (`listed`), so the scrape-gap rule below never counts
    these pods again from the exporter's labels."""
    by_pk = {flavor.pk: flavor for flavor in flavors}
    running = {
        s.labels.get("uid", ""): [t for t, value in s.points if value]
        for s in answers.get("dra_running", [])
    }
    activity = defaultdict(dict)  # device key -> {timestamp: activity}
    for series in answers.get("dra_activity", []):
        activity[_device_key(series.labels)].update(series.points)
    held = defaultdict(set)  # (namespace, pod, uid, flavor id, node) -> device keys
    for a in allocations:
        key = inventory.exporter_device(a.node, a.device) or (a.node, a.device, "")
        if a.flavor_id in by_pk:
            held[(a.namespace, a.pod, a.pod_uid, a.flavor_id, a.node)].add(key)
    for (namespace, pod, uid, flavor_id, node), keys in sorted(held.items()):
        totals, load = targets(namespace, pod, by_pk[flavor_id])
        spot, requested = resolve.is_spot(node), len(keys)
        for timestamp in running.get(uid, []):
            readings = sorted(
                (activity[k][timestamp] for k in keys if timestamp in activity[k]), reverse=True
            )
            active = sum(r >= threshold for r in readings)
            idle = (len(readings) - active) * step
            unmetered = (requested - len(readings)) * step
            _add(totals, load, requested * step, active * step, idle, spot, unmetered, dra=True)
            if load is not None:
                load.gpus = max(load.gpus, requested)
                _read(load, readings, [])


def _add(totals, load, allocated, active, idle, spot, unmetered=0, dra=False):
    for target in (totals, load) if load is not None else (totals,):
        if dra:
            target.dra += allocated
        target.allocated += allocated
        target.active += active
        target.idle += idle
        target.unmetered += unmetered
        if spot:
            target.spot += allocated


def _read(load, readings, memory):
    for reading in readings:
        load.activity_total += reading
        load.samples += 1
        band = str(activity_band(reading))
        load.histogram[band] = load.histogram.get(band, 0) + 1
    if memory:
        load.fb_peak = max(load.fb_peak or 0.0, max(memory))


def _lost_run(running, steps, listed, step):
    """(when the run ended, the first step kube-state-metrics saw it not running)
    if a pod's run ended inside the hour, else None: still running at the
    hour's end, or the rest of the hour a scrape gap. The end is the end of
    its last running step (a gap after it hides when exactly it stopped)."""
    if not running or not steps:
        return None
    last = running[-1][0]
    seen = next((t for t in steps if t > last and t in listed), None)
    return None if seen is None else (last + step, seen)


def _hit_by_xid(gpus, xids, end, step):
    """A GPU of the pod reported a new XID that is not the application's from
    XID_LEAD (or a step) before the pod's last running step to two steps after
    it was seen stopped (the exporter and kube-state-metrics are scraped apart:
    the XID can show a scrape later). New: unlike what the GPU read before that,
    which can be in the previous hour (`fetch_hour` reads the XIDs from there)."""
    ended, seen = end
    since = ended - step - max(step, XID_LEAD)
    for gpu in gpus:
        codes = xids.get(gpu, {})
        earlier = [moment for moment in codes if moment < since]
        before = codes[max(earlier)] if earlier else 0
        for moment, code in codes.items():
            if since <= moment <= seen + 2 * step:
                code = int(code)
                if code and code != before and code not in APPLICATION_XIDS:
                    return True
    return False


def _resource_of(profile, listed, offered):
    """The resource a device seen in a scrape gap belongs to: its MIG profile's,
    else what kube-state-metrics said the pod requested, else the node's GPUs."""
    if profile:
        return "nvidia_com_mig_" + sanitize(profile)
    if listed:
        return listed[0]
    whole = sorted(r for r in offered if "_mig_" not in r)
    return whole[0] if whole else ""


def _carried(points, gaps):
    """A node's allocatable over the gap steps, from its nearest earlier sample
    of the hour (else the first later one): nodes' capacity seldom changes."""
    if not points:
        return 0
    moments = [t for t, _ in points]
    return sum(points[max(bisect.bisect_left(moments, moment) - 1, 0)][1] for moment in gaps)


def activity_band(reading):
    return min(int(max(reading, 0.0) * HISTOGRAM_BANDS), HISTOGRAM_BANDS - 1)


def merge_histograms(histograms):
    merged = {}
    for histogram in histograms:
        for band, count in (histogram or {}).items():
            merged[int(band)] = merged.get(int(band), 0) + count
    return merged


def histogram_percentile(histogram, fraction):
    """Upper edge (0-1) of the 1 % band holding the `fraction` quantile of samples."""
    total = sum(histogram.values())
    if not total:
        return None
    needed = fraction * total
    running = 0
    for band in sorted(histogram):
        running += histogram[band]
        if running >= needed:
            return (band + 1) / HISTOGRAM_BANDS
    return 1.0


def _quoted(value):
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class RecentPod:
    namespace: str
    pod: str
    kind: str
    name: str
    model: str  # the exporter's modelName (and MIG profile): the shape when the ledger has none
    minutes: dict = field(default_factory=dict)  # unix seconds -> [activity of each device]


def recent_queries(namespaces, window="24h", step=60):
    """The PromQL of the last 24 hours' strips: the engine activity of every
    device a pod of `namespaces` holds (one series per device), and who owns
    each pod (kube-state-metrics' own labels)."""
    ns_label = settings.PORTAL_BILLING_LABEL_NAMESPACE
    pod = settings.PORTAL_BILLING_LABEL_POD
    wanted = _quoted(_regex(namespaces))
    match = f'{ns_label}=~{wanted},{pod}!=""'
    raw = f"[{step * 1000 - 1}ms]"
    return {
        "activity": (
            f"last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{match}}}{raw})"
            f' or last_over_time(DCGM_FI_DEV_GPU_UTIL{{{match},GPU_I_PROFILE=""}}{raw}) / 100'
        ),
        "owners": owners_query(window, f"namespace=~{wanted}"),
    }


def recent_pods(namespaces, start, end, step=60):
    """[RecentPod] of `namespaces` between `start` and `end`, per minute (two queries).

    A device is held while the exporter names a pod on it (it reads the
    kubelet's pod-resources API), so idle GPUs show, and nothing shows where
    nothing ran.
    """
    if not namespaces:
        return []
    texts = recent_queries(namespaces, f"{int((end - start).total_seconds())}s", step)
    activity = prometheus.query_range(texts["activity"], start, end, step)
    owners = Owners(prometheus.query(texts["owners"], at=end))
    ns_label = settings.PORTAL_BILLING_LABEL_NAMESPACE
    pod_label = settings.PORTAL_BILLING_LABEL_POD
    pods = {}
    for series in activity:
        labels = series.labels
        key = (labels.get(ns_label, ""), labels.get(pod_label, ""))
        found = pods.get(key)
        if found is None:
            kind, name = owners.workload(*key)
            model = labels.get("modelName", "GPU")
            if labels.get("GPU_I_PROFILE"):
                model += f" MIG {labels['GPU_I_PROFILE']}"
            found = pods[key] = RecentPod(key[0], key[1], kind, name, model)
        for timestamp, value in series.points:
            found.minutes.setdefault(timestamp, []).append(value)
    return list(pods.values())
