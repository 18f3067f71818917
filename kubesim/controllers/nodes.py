"""Node lifecycle as pure functions: the taints the node lifecycle controller keeps in
step with a node's Ready condition and cordon, NoExecute taint eviction deadlines, the
replacement a cloud provisions for a reclaimed spot node, and seeded reclaim times.
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
from datetime import datetime, timedelta

from kubesim.clock import parse_time
from kubesim.controllers.scheduler import UNSCHEDULABLE_TAINT, tolerates

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
# Taints this module owns; any other taint on a node is left alone.
MANAGED_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT)
READY_REASONS = {
    "True": ("KubeletReady", "kubelet is posting ready status"),
    "False": ("KubeletNotReady", "container runtime network not ready"),
    "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
}


def ready_status(node: dict) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status", "Unknown")
    return "Unknown"


def with_ready(node: dict, status: str, stamp: str, reason=None, message=None) -> dict:
    """The node with its Ready condition set (the other conditions go Unknown with it,
    as the node lifecycle controller writes them when the kubelet stops posting)."""
    default_reason, default_message = READY_REASONS[status]
    node = copy.deepcopy(node)
    for condition in node.setdefault("status", {}).setdefault("conditions", []):
        if condition.get("type") == "Ready":
            if condition.get("status") != status:
                condition["lastTransitionTime"] = stamp
            condition.update(
                status=status,
                reason=reason or default_reason,
                message=message or default_message,
                lastHeartbeatTime=stamp,
            )
    return node


def desired_taints(node: dict, stamp: str) -> list[dict]:
    """Taints by condition (TaintNodesByCondition and taint-based eviction): not-ready
    or unreachable as NoSchedule and NoExecute, unschedulable:NoSchedule for a cordoned
    node. Existing managed taints keep their timeAdded."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    wanted = []
    ready = ready_status(node)
    if ready != "True":
        key = NOT_READY_TAINT if ready == "False" else UNREACHABLE_TAINT
        wanted += [(key, "NoSchedule"), (key, "NoExecute")]
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
    existing = {(t.get("key"), t.get("effect")): t for t in taints}
    kept = [t for t in taints if t.get("key") not in MANAGED_TAINTS]
    for key, effect in wanted:
        taint = existing.get((key, effect)) or {"key": key, "effect": effect}
        if effect == "NoExecute" and "timeAdded" not in taint:
            taint = {**taint, "timeAdded": stamp}
        kept.append(taint)
    return kept


def eviction_time(pod: dict, taints: list[dict], now: datetime) -> datetime | None:
    """When the taint eviction controller deletes `pod` for the node's NoExecute
    taints: at once if one is not tolerated, else after the shortest tolerationSeconds
    among the matching tolerations (counted from when the taint came); None while
    they tolerate it for ever."""
    no_execute = [t for t in taints if t.get("effect") == "NoExecute"]
    if not no_execute:
        return None
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    used = []
    for taint in no_execute:
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return now
        used += matching
    seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    added = [parse_time(t["timeAdded"]) for t in no_execute if t.get("timeAdded")]
    start = min(added) if added else now
    return start + timedelta(seconds=max(0, min(seconds)))


def pool_prefix(name: str) -> str:
    match = re.match(r"^(.*)-(\d+)$", name)
    return match.group(1) if match else name


def replacement_name(name: str, taken: set[str]) -> str:
    """The next free `<prefix>-<n>` of the reclaimed node's pool."""
    prefix = pool_prefix(name)
    index = 0
    while f"{prefix}-{index}" in taken:
        index += 1
    return f"{prefix}-{index}"


def replacement_node(node: dict, name: str, stamp: str) -> dict:
    """A fresh node like `node` (same pool, labels, capacity) under a new name."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    spec = {
        key: value
        for key, value in (node.get("spec") or {}).items()
        if key not in ("unschedulable", "taints")
    }
    spec["providerID"] = f"kubesim://{name}"
    taints = [
        t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] not in MANAGED_TAINTS
    ]
    if taints:
        spec["taints"] = taints
    labels = dict(node["metadata"].get("labels") or {})
    labels["kubernetes.io/hostname"] = name
    status = copy.deepcopy(node.get("status") or {})
    status["allocatable"] = dict(status.get("capacity") or {})
    ip = f"10.0.{int(digest[:2], 16)}.{int(digest[2:4], 16) % 250 + 2}"
    status["addresses"] = [
        {"type": "InternalIP", "address": ip},
        {"type": "Hostname", "address": name},
    ]
    info = status.setdefault("nodeInfo", {})
    info.update(machineID=digest[:32], bootID=digest[32:64])
    for condition in status.get("conditions") or []:
        condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    replacement = with_ready({**node, "status": status}, "True", stamp)
    replacement["metadata"] = {
        "name": name,
        "labels": labels,
        "annotations": {},
    }
    replacement["spec"] = spec
    return replacement


def next_reclaim(seed, node_name: str, after: datetime, rate_per_hour: float) -> datetime | None:
    """The seeded moment a spot node is reclaimed: exponential waiting time (a Poisson
    process with `rate_per_hour`) from `after`, the same for the same seed and node."""
    if not rate_per_hour or rate_per_hour <= 0:
        return None
    rng = random.Random(f"{seed}/{node_name}")  # node names are never reused
    return after + timedelta(hours=rng.expovariate(rate_per_hour))
