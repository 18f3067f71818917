"""kube-state-metrics text for the simulated objects (pure).

Families, label names, label order and value formats follow kube-state-metrics v2
(`internal/store/{job,namespace,node,pod,resourcequota}.go`): the object's default
labels first (`namespace, pod, uid`; `namespace, job_name`; `node`; `namespace,
resourcequota`), then the family's own; resource names sanitised
(`nvidia.com/gpu` -> `nvidia_com_gpu`) with their unit (`core`, `byte`, `integer`);
values printed as Go's `%g` (`1.7e+09` for timestamps). `kube_*_labels` carry only
the labels an operator allowlisted (`--metric-labels-allowlist`).

Each `*_rows(obj, ...)` returns `[(family, labels, value)]` for one object; the
live endpoint and the history generator both call them.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kubesim import quantity
from kubesim.apiserver.quota import is_extended
from kubesim.clock import parse_time
from kubesim.cluster import MIG_PROFILE_MEMORY
from kubesim.exposition import Family, go_float, render, sanitize

S = "[STABLE] "  # kube-state-metrics prefixes the help of stable families
FAMILIES = [
    Family("kube_job_owner", "gauge", S + "Information about the Job's owner."),
    Family("kube_replicaset_owner", "gauge", S + "Information about the ReplicaSet's owner."),
    Family("kube_job_labels", "gauge", S + "Kubernetes labels converted to Prometheus labels."),
    Family("kube_job_info", "gauge", S + "Information about job."),
    Family(
        "kube_job_spec_parallelism",
        "gauge",
        S + "The maximum desired number of pods the job should run at any given time.",
    ),
    Family(
        "kube_job_spec_completions",
        "gauge",
        S + "The desired number of successfully finished pods the job should be run with.",
    ),
    Family(
        "kube_job_status_succeeded",
        "gauge",
        S + "The number of pods which reached Phase Succeeded.",
    ),
    Family(
        "kube_job_status_failed",
        "gauge",
        S + "The number of pods which reached Phase Failed and the reason for failure.",
    ),
    Family("kube_job_status_active", "gauge", S + "The number of actively running pods."),
    Family("kube_job_complete", "gauge", S + "The job has completed its execution."),
    Family("kube_job_failed", "gauge", S + "The job has failed its execution."),
    Family(
        "kube_job_status_start_time",
        "gauge",
        S + "StartTime represents time when the job was acknowledged by the Job Manager.",
    ),
    Family(
        "kube_job_status_completion_time",
        "gauge",
        S + "CompletionTime represents time when the job was completed.",
    ),
    Family(
        "kube_namespace_labels", "gauge", S + "Kubernetes labels converted to Prometheus labels."
    ),
    Family("kube_namespace_status_phase", "gauge", S + "kubernetes namespace status phase."),
    Family("kube_node_labels", "gauge", S + "Kubernetes labels converted to Prometheus labels."),
    Family("kube_node_spec_unschedulable", "gauge", S + "Whether a node can schedule new pods."),
    Family(
        "kube_node_status_allocatable",
        "gauge",
        S + "The allocatable for different resources of a node that are available for scheduling.",
    ),
    Family(
        "kube_node_status_capacity", "gauge", S + "The capacity for different resources of a node."
    ),
    Family("kube_node_status_condition", "gauge", S + "The condition of a cluster node."),
    Family("kube_pod_completion_time", "gauge", S + "Completion time in unix timestamp for a pod."),
    Family(
        "kube_pod_container_resource_limits",
        "gauge",
        "The number of requested limit resource by a container. It is recommended to use the "
        "kube_pod_resource_limits metric exposed by kube-scheduler instead, as it is more "
        "precise.",
    ),
    Family(
        "kube_pod_container_resource_requests",
        "gauge",
        "The number of requested request resource by a container. It is recommended to use the "
        "kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more "
        "precise.",
    ),
    Family("kube_pod_info", "gauge", S + "Information about pod."),
    Family("kube_pod_labels", "gauge", S + "Kubernetes labels converted to Prometheus labels."),
    Family("kube_pod_owner", "gauge", S + "Information about the Pod's owner."),
    Family("kube_pod_start_time", "gauge", S + "Start time in unix timestamp for a pod."),
    Family("kube_pod_status_phase", "gauge", S + "The pods current phase."),
    Family("kube_resourcequota", "gauge", S + "Information about resource quota."),
]

POD_PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "Evicted")

# What an operator running the portal passes as --metric-labels-allowlist: the
# portal's own labels (provisioning/manifests.py), Job and Kueue labels, and the
# node labels GPU Feature Discovery and the spot provisioners set.
GFD_NODE_LABELS = [
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/mig.strategy",
    "nvidia.com/mig.config",
    *(f"nvidia.com/mig-{profile}.count" for profile in MIG_PROFILE_MEMORY),
]
PORTAL_LABELS = ["app.kubernetes.io/managed-by", "gpu-portal.io/team"]
DEFAULT_ALLOWLIST = {
    "namespaces": PORTAL_LABELS,
    "pods": [*PORTAL_LABELS, "batch.kubernetes.io/job-name", "kueue.x-k8s.io/queue-name"],
    "jobs": [*PORTAL_LABELS, "kueue.x-k8s.io/queue-name"],
    "nodes": [
        *GFD_NODE_LABELS,
        "karpenter.sh/capacity-type",
        "cloud.google.com/gke-spot",
        "kubernetes.azure.com/scalesetpriority",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "kubesim.io/pool",
    ],
}

_ALLOWLIST_ENTRY = re.compile(r"\s*([a-z0-9.]+)\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


def parse_allowlist(text: str) -> dict[str, list[str]]:
    """`pods=[a,b],nodes=[*]`, the syntax of kube-state-metrics' --metric-labels-allowlist."""
    allowlist: dict[str, list[str]] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _ALLOWLIST_ENTRY.match(text, position)
        if not match:
            raise ValueError(
                f"metric labels allowlist: cannot parse {text[position:]!r}; "
                "expected resource=[label,...],..."
            )
        labels = [label.strip() for label in match.group(2).split(",") if label.strip()]
        allowlist[match.group(1)] = labels
        position = match.end()
    return allowlist


def _label_rows(prefix: str, labels: dict, allowed: list[str] | None) -> list[tuple]:
    """label_<sanitised key> pairs for the allowlisted labels, sorted as KSM sorts them."""
    if not allowed:
        return []
    keys = labels if "*" in allowed else [key for key in allowed if key in labels]
    pairs = sorted((f"{prefix}_{sanitize(key)}", labels[key]) for key in keys)
    return pairs


def _timestamp(text: str | None) -> float | None:
    return parse_time(text).timestamp() if text else None


def _resource_unit(name: str, value: Fraction) -> tuple[str, float] | None:
    """(unit, value) as KSM reports a resource quantity; None for resources it skips."""
    if name == "cpu":
        return "core", math.ceil(value * 1000) / 1000
    if name in ("memory", "ephemeral-storage", "storage") or name.startswith("hugepages-"):
        return "byte", float(math.ceil(value))
    if name == "pods" or is_extended(name):
        return "integer", float(math.ceil(value))
    return None


# --- pods ---


def pod_rows(pod: dict, allowlist: dict) -> list[tuple]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    status = pod.get("status") or {}
    base = (("namespace", meta["namespace"]), ("pod", meta["name"]), ("uid", meta.get("uid", "")))
    node = spec.get("nodeName") or ""
    rows = []
    owners = meta.get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    rows.append(
        (
            "kube_pod_info",
            base
            + (
                ("host_ip", status.get("hostIP", "")),
                ("pod_ip", status.get("podIP", "")),
                ("node", node),
                ("created_by_kind", controller["kind"] if controller else ""),
                ("created_by_name", controller["name"] if controller else ""),
                ("priority_class", spec.get("priorityClassName", "")),
                ("host_network", "true" if spec.get("hostNetwork") else "false"),
            ),
            1,
        )
    )
    for owner in owners or [{"kind": "<none>", "name": "<none>", "controller": "<none>"}]:
        is_controller = owner.get("controller")
        flag = is_controller if isinstance(is_controller, str) else str(bool(is_controller)).lower()
        rows.append(
            (
                "kube_pod_owner",
                base
                + (
                    ("owner_kind", owner.get("kind", "")),
                    ("owner_name", owner.get("name", "")),
                    ("owner_is_controller", flag),
                ),
                1,
            )
        )
    allowed = allowlist.get("pods")
    if allowed:
        rows.append(
            (
                "kube_pod_labels",
                base + tuple(_label_rows("label", meta.get("labels") or {}, allowed)),
                1,
            )
        )
    for kind, family in (
        ("requests", "kube_pod_container_resource_requests"),
        ("limits", "kube_pod_container_resource_limits"),
    ):
        for container in spec.get("containers") or []:
            values = (container.get("resources") or {}).get(kind) or {}
            for name in sorted(values):
                unit = _resource_unit(name, quantity.parse(values[name]))
                if unit:
                    rows.append(
                        (
                            family,
                            base
                            + (
                                ("container", container["name"]),
                                ("node", node),
                                ("resource", sanitize(name)),
                                ("unit", unit[0]),
                            ),
                            unit[1],
                        )
                    )
    phase = status.get("phase")
    if phase:
        for candidate in POD_PHASES:
            rows.append(
                ("kube_pod_status_phase", base + (("phase", candidate),), int(candidate == phase))
            )
    started = _timestamp(status.get("startTime"))
    if started is not None:
        rows.append(("kube_pod_start_time", base, started))
    finished = [
        _timestamp(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    finished = [moment for moment in finished if moment]
    if finished:
        rows.append(("kube_pod_completion_time", base, max(finished)))
    return rows


# --- jobs ---


def _condition_rows(family: str, base: tuple, status: str) -> list[tuple]:
    return [
        (family, base + (("condition", name),), int(status.lower() == name))
        for name in ("true", "false", "unknown")
    ]


def _owner_rows(family: str, base: tuple, meta: dict, none: str) -> list[tuple]:
    """`kube_<kind>_owner`: one row per ownerReference; without any, one whose
    owner labels are `none` ("" for Jobs, "<none>" for ReplicaSets, as KSM says)."""
    owners = meta.get("ownerReferences") or [{"kind": none, "name": none, "controller": none}]
    rows = []
    for owner in owners:
        is_controller = owner.get("controller")
        flag = is_controller if isinstance(is_controller, str) else str(bool(is_controller)).lower()
        owner_labels = (
            ("owner_kind", owner.get("kind", "")),
            ("owner_name", owner.get("name", "")),
        )
        rows.append((family, base + owner_labels + (("owner_is_controller", flag),), 1))
    return rows


def replica_set_rows(rs: dict, allowlist: dict) -> list[tuple]:
    """internal/store/replicaset.go's owner family (what idle policies read)."""
    meta = rs["metadata"]
    base = (("namespace", meta["namespace"]), ("replicaset", meta["name"]))
    return _owner_rows("kube_replicaset_owner", base, meta, "<none>")


def job_rows(job: dict, allowlist: dict) -> list[tuple]:
    meta, spec = job["metadata"], job.get("spec") or {}
    status = job.get("status") or {}
    base = (("namespace", meta["namespace"]), ("job_name", meta["name"]))
    rows = _owner_rows("kube_job_owner", base, meta, "")
    allowed = allowlist.get("jobs")
    if allowed:
        labels = tuple(_label_rows("label", meta.get("labels") or {}, allowed))
        rows.append(("kube_job_labels", base + labels, 1))
    rows.append(("kube_job_info", base, 1))
    for key, family in (
        ("parallelism", "kube_job_spec_parallelism"),
        ("completions", "kube_job_spec_completions"),
    ):
        if spec.get(key) is not None:
            rows.append((family, base, spec[key]))
    rows.append(("kube_job_status_succeeded", base, status.get("succeeded", 0)))
    failed = status.get("failed", 0)
    conditions = status.get("conditions") or []
    if not failed:
        rows.append(("kube_job_status_failed", base, 0))
    else:
        known = False
        for condition in conditions:
            if condition.get("type") == "Failed":
                for reason in JOB_FAILURE_REASONS:
                    matches = condition.get("reason") == reason
                    known = known or matches
                    rows.append(
                        ("kube_job_status_failed", base + (("reason", reason),), int(matches))
                    )
        if not known:
            rows.append(("kube_job_status_failed", base + (("reason", ""),), failed))
    rows.append(("kube_job_status_active", base, status.get("active", 0)))
    for condition in conditions:
        if condition.get("type") == "Complete":
            rows += _condition_rows("kube_job_complete", base, condition.get("status", ""))
        elif condition.get("type") == "Failed":
            rows += _condition_rows("kube_job_failed", base, condition.get("status", ""))
    for key, family in (
        ("startTime", "kube_job_status_start_time"),
        ("completionTime", "kube_job_status_completion_time"),
    ):
        moment = _timestamp(status.get(key))
        if moment is not None:
            rows.append((family, base, moment))
    return rows


# --- namespaces, nodes, quotas ---


def namespace_rows(namespace: dict, allowlist: dict) -> list[tuple]:
    meta = namespace["metadata"]
    base = (("namespace", meta["name"]),)
    rows = []
    allowed = allowlist.get("namespaces")
    if allowed:
        labels = tuple(_label_rows("label", meta.get("labels") or {}, allowed))
        rows.append(("kube_namespace_labels", base + labels, 1))
    phase = (namespace.get("status") or {}).get("phase", "Active")
    for candidate in ("Active", "Terminating"):
        rows.append(
            ("kube_namespace_status_phase", base + (("phase", candidate),), int(phase == candidate))
        )
    return rows


def node_rows(node: dict, allowlist: dict) -> list[tuple]:
    meta, status = node["metadata"], node.get("status") or {}
    base = (("node", meta["name"]),)
    rows = []
    allowed = allowlist.get("nodes")
    if allowed:
        labels = tuple(_label_rows("label", meta.get("labels") or {}, allowed))
        rows.append(("kube_node_labels", base + labels, 1))
    rows.append(
        (
            "kube_node_spec_unschedulable",
            base,
            int(bool((node.get("spec") or {}).get("unschedulable"))),
        )
    )
    for key, family in (
        ("allocatable", "kube_node_status_allocatable"),
        ("capacity", "kube_node_status_capacity"),
    ):
        values = status.get(key) or {}
        for name in sorted(values):
            unit = _resource_unit(name, quantity.parse(values[name]))
            if unit:
                labels = (("resource", sanitize(name)), ("unit", unit[0]))
                rows.append((family, base + labels, unit[1]))
    for condition in status.get("conditions") or []:
        for state in ("true", "false", "unknown"):
            labels = (("condition", condition["type"]), ("status", state))
            rows.append(
                (
                    "kube_node_status_condition",
                    base + labels,
                    int(condition.get("status", "").lower() == state),
                )
            )
    return rows


def quota_rows(resource_quota: dict, allowlist: dict) -> list[tuple]:
    meta, status = resource_quota["metadata"], resource_quota.get("status") or {}
    base = (("namespace", meta["namespace"]), ("resourcequota", meta["name"]))
    rows = []
    for kind in ("hard", "used"):
        values = status.get(kind) or {}
        for name in sorted(values):
            # KSM reports quota quantities as MilliValue()/1000, names unsanitised.
            value = math.ceil(quantity.parse(values[name]) * 1000) / 1000
            rows.append(("kube_resourcequota", base + (("resource", name), ("type", kind)), value))
    return rows


ROWS_BY_RESOURCE = {
    "jobs": job_rows,
    "namespaces": namespace_rows,
    "nodes": node_rows,
    "pods": pod_rows,
    "replicasets": replica_set_rows,
    "resourcequotas": quota_rows,
}


def render_objects(objects: dict[str, list[dict]], allowlist: dict | None = None) -> str:
    """The /metrics page of kube-state-metrics for `{resource: [objects]}`."""
    allowlist = DEFAULT_ALLOWLIST if allowlist is None else allowlist
    grouped: dict[str, list[tuple]] = {}
    for resource, rows_for in ROWS_BY_RESOURCE.items():
        for obj in objects.get(resource) or ():
            for family, labels, value in rows_for(obj, allowlist):
                grouped.setdefault(family, []).append((labels, go_float(value)))
    return render(FAMILIES, grouped)
