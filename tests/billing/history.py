"""A small OpenMetrics history for billing tests, written the way
kube-state-metrics and dcgm-exporter label their series, sampled every
minute on the minute. Each scenario states its expected ledger figures."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

STEP = 60


@dataclass
class Device:
    gpu: int
    # minute offset from the pod's start -> engine activity 0-1 (None: no sample)
    activity: object
    mig_profile: str = ""
    instance: int = 0
    fb_mib: int = 4096
    profiling: bool = True  # False: only DCGM_FI_DEV_GPU_UTIL, as without DCP counters
    xid: object = None  # minute offset -> last XID code (DCGM_FI_DEV_XID_ERRORS)


@dataclass
class Pod:
    namespace: str
    name: str
    node: str
    resource: str  # kube-state-metrics' sanitised name, e.g. nvidia_com_gpu
    gpus: int
    start: datetime
    end: datetime
    devices: list = field(default_factory=list)
    owner: tuple = ("<none>", "<none>")
    ends_as: str = "Succeeded"  # Failed: killed (a spot reclaim, an XID)
    created: datetime | None = None  # Pending from here to `start`; default 2 minutes before

    @property
    def uid(self):
        return f"uid-{self.namespace}-{self.name}"


@dataclass
class Node:
    name: str
    product: str
    allocatable: dict  # sanitised resource -> devices
    labels: dict = field(default_factory=dict)  # more exported labels: label_* -> value


def minutes(start, end):
    moment = start
    while moment < end:
        yield moment
        moment += timedelta(seconds=STEP)


def _labels(pairs):
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def openmetrics(nodes, pods, start, end, hostname_label="Hostname"):
    """The text promtool turns into blocks: samples over [start, end).
    `hostname_label`: `hostname` is what the exporter's main branch writes."""
    families = {}

    def add(metric, labels, moment, value):
        families.setdefault(metric, {}).setdefault(_labels(labels), []).append((moment, value))

    for node in nodes:
        for moment in minutes(start, end):
            add(
                "kube_node_labels",
                [("node", node.name), ("label_nvidia_com_gpu_product", node.product)]
                + sorted(node.labels.items()),
                moment,
                1,
            )
            for resource, count in node.allocatable.items():
                add(
                    "kube_node_status_allocatable",
                    [("node", node.name), ("resource", resource), ("unit", "integer")],
                    moment,
                    count,
                )
    for pod in pods:
        ident = [("namespace", pod.namespace), ("pod", pod.name), ("uid", pod.uid)]
        kind, owner = pod.owner
        for moment in minutes(start, end):
            if moment < (pod.created or pod.start - timedelta(minutes=2)):
                continue
            # kube-state-metrics keeps the requests series after the pod ended:
            # only the phase join keeps finished pods out.
            add(
                "kube_pod_container_resource_requests",
                ident
                + [("container", "main"), ("node", pod.node)]
                + [("resource", pod.resource), ("unit", "integer")],
                moment,
                pod.gpus,
            )
            phase = "Pending" if moment < pod.start else "Running"
            if moment >= pod.end:
                phase = pod.ends_as
            for each in ("Pending", "Running", "Succeeded", "Failed"):
                add("kube_pod_status_phase", ident + [("phase", each)], moment, int(each == phase))
            if moment >= pod.start:
                add("kube_pod_start_time", ident, moment, int(pod.start.timestamp()))
            add(
                "kube_pod_owner",
                ident
                + [("owner_kind", kind), ("owner_name", owner), ("owner_is_controller", "true")],
                moment,
                1,
            )
        for device in pod.devices:
            labels = [
                ("gpu", device.gpu),
                ("UUID", f"GPU-{pod.node}-{device.gpu}"),
                ("device", f"nvidia{device.gpu}"),
                ("modelName", "NVIDIA test"),
            ]
            if device.mig_profile:
                labels += [("GPU_I_PROFILE", device.mig_profile), ("GPU_I_ID", device.instance)]
            labels += [(hostname_label, pod.node), ("container", "main")]
            labels += [("namespace", pod.namespace), ("pod", pod.name)]
            for index, moment in enumerate(minutes(pod.start, pod.end)):
                value = device.activity(index)
                if value is None:
                    continue
                if device.profiling:
                    add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, moment, value)
                util = 0 if device.mig_profile else round(value * 100)
                add("DCGM_FI_DEV_GPU_UTIL", labels, moment, util)
                add("DCGM_FI_DEV_FB_USED", labels, moment, device.fb_mib)
                if device.xid is not None:
                    add("DCGM_FI_DEV_XID_ERRORS", labels, moment, device.xid(index))
    lines = []
    for metric, series in families.items():
        lines.append(f"# TYPE {metric} gauge")
        for labels, samples in series.items():
            for moment, value in samples:
                lines.append(f"{metric}{labels} {value} {int(moment.timestamp())}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


# --- the scenario the ledger tests check ---

DAY = datetime(2026, 11, 2, tzinfo=UTC)
H10 = DAY.replace(hour=10)
H11 = DAY.replace(hour=11)


def at(hour, minute):
    return DAY.replace(hour=hour, minute=minute)


def constant(value):
    return lambda index: value


NODES = [
    Node("gpu-h100-0", "NVIDIA-H100-80GB-HBM3", {"nvidia_com_gpu": 8}),
    Node("gpu-a100-0", "NVIDIA-A100-SXM4-80GB", {"nvidia_com_gpu": 8}),
    Node("gpu-mig-0", "NVIDIA-A100-SXM4-80GB", {"nvidia_com_mig_3g_40gb": 2}),
    Node("gpu-t4-0", "Tesla-T4-SHARED", {"nvidia_com_gpu_shared": 4}),
    Node(
        "gpu-l4-0",
        "NVIDIA-L4",
        {"nvidia_com_gpu": 2},
        labels={"label_karpenter_sh_capacity_type": "spot"},
    ),
]

PODS = [
    # Crosses 11:00. gpu0 busy; gpu1 exactly at the 5 % threshold for 15
    # minutes (active), then just under it (idle).
    Pod(
        "vision",
        "train-7x2kq",
        "gpu-h100-0",
        "nvidia_com_gpu",
        2,
        at(10, 30),
        at(11, 15),
        devices=[
            Device(0, constant(0.9), fb_mib=70000),
            Device(1, lambda i: 0.05 if i < 15 else 0.04, fb_mib=9000),
        ],
        owner=("Job", "train"),
    ),
    # Idle all hour, with a ten-minute scrape gap: unmetered, not idle.
    Pod(
        "vision",
        "notebook",
        "gpu-a100-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(11, 0),
        devices=[
            Device(
                3,
                lambda i: None if 20 <= i < 30 else 0.0,
                fb_mib=2000,
                xid=lambda i: 79 if i >= 40 else 0,  # fell off the bus at 10:40
            )
        ],
    ),
    # A MIG slice: GPU_UTIL reads 0 there, the profiling field tells the truth.
    Pod(
        "nlp",
        "mig-job-1",
        "gpu-mig-0",
        "nvidia_com_mig_3g_40gb",
        1,
        at(10, 0),
        at(11, 0),
        devices=[Device(0, constant(0.3), mig_profile="3g.40gb", instance=1)],
        owner=("Job", "mig-job"),
    ),
    # Two pods time-slicing one T4 (no profiling counters): the exporter
    # copies the device to both; each share counts once.
    *[
        Pod(
            "nlp",
            f"shared-{n}",
            "gpu-t4-0",
            "nvidia_com_gpu_shared",
            1,
            at(10, 0),
            at(10, 30),
            devices=[Device(0, constant(0.5), profiling=False)],
            owner=("Job", "shared"),
        )
        for n in (1, 2)
    ],
    # Spot capacity: priced with the spot factor.
    Pod(
        "nlp",
        "eval-2k4mz",
        "gpu-l4-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(11, 0),
        devices=[Device(0, constant(0.7))],
        owner=("Job", "eval"),
    ),
    # A namespace of no team: the platform's "other" line.
    Pod(
        "kube-system",
        "burn-in",
        "gpu-h100-0",
        "nvidia_com_gpu",
        1,
        at(10, 0),
        at(10, 10),
        devices=[Device(7, constant(1.0))],
    ),
]


def scenario_text():
    return openmetrics(NODES, PODS, DAY.replace(hour=9), DAY.replace(hour=13))
