"""Scheduling as pure functions: which nodes a pod fits, and why the others refuse it.

Filters run in the default scheduler's plugin order (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit) and a node reports only its first
failing plugin, so the FailedScheduling histogram reads like the real one.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from kubesim import quantity
from kubesim.apiserver.quota import effective, is_extended
from kubesim.cluster import Device, node_devices
from kubesim.controllers import xid

DEVICES_ANNOTATION = "kubesim.io/gpu-devices"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# Reasons a node refuses a pod, as the scheduler words them.
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"


def _unresolvable(reason: str) -> bool:
    """Reasons preemption cannot fix (evicting pods does not change labels or taints)."""
    return not (reason.startswith("Insufficient") or reason == TOO_MANY_PODS)


def tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration["key"] != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(pod: dict, node: dict) -> dict | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _expression_matches(expression: dict, labels: dict) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            label, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return label > bound if operator == "Gt" else label < bound
    return False


def _term_matches(term: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    expressions = term.get("matchExpressions") or []
    field_expressions = term.get("matchFields") or []
    if not expressions and not field_expressions:
        return False  # an empty term matches no objects
    return all(_expression_matches(e, labels) for e in expressions) and all(
        _expression_matches(e, fields) for e in field_expressions
    )


def matches_node_selector(pod: dict, node: dict) -> bool:
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_term_matches(term, node) for term in terms)


def is_active(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pod_requests(pod: dict) -> dict[str, Fraction]:
    return effective(pod.get("spec") or {}, "requests")


def insufficient(pod: dict, node: dict, pods_on_node: list[dict]) -> list[str]:
    """NodeResourcesFit reasons: every resource that does not fit, sorted as the
    scheduler reports them (pod count first, then resource names)."""
    allocatable = {
        name: quantity.parse(value)
        for name, value in ((node.get("status") or {}).get("allocatable") or {}).items()
    }
    running = [p for p in pods_on_node if is_active(p)]
    reasons = []
    if len(running) + 1 > allocatable.get("pods", Fraction(110)):
        reasons.append(TOO_MANY_PODS)
    used: dict[str, Fraction] = {}
    for other in running:
        for name, value in pod_requests(other).items():
            used[name] = used.get(name, Fraction(0)) + value
    for name, value in sorted(pod_requests(pod).items()):
        if value <= 0:
            continue
        free = allocatable.get(name, Fraction(0)) - used.get(name, Fraction(0))
        if value > free:
            reasons.append(f"Insufficient {name}")
    return reasons


def filter_node(pod: dict, node: dict, pods_on_node: list[dict]) -> list[str]:
    """Why `node` cannot take `pod` ([] when it can)."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        cordon = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if not any(tolerates(t, cordon) for t in tolerations):
            return [UNSCHEDULABLE]
    taint = untolerated_taint(pod, node)
    if taint:
        return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value') or ''}}}"]
    if not matches_node_selector(pod, node):
        return [AFFINITY]
    return insufficient(pod, node, pods_on_node)


def _score(pod: dict, node: dict, pods_on_node: list[dict]) -> Fraction:
    """LeastAllocated over cpu and memory: prefer the emptier node, like the default."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    used: dict[str, Fraction] = dict(pod_requests(pod))
    for other in pods_on_node:
        if is_active(other):
            for name, value in pod_requests(other).items():
                used[name] = used.get(name, Fraction(0)) + value
    score = Fraction(0)
    for name in ("cpu", "memory"):
        capacity = quantity.parse(allocatable.get(name, "0"))
        if capacity:
            score += (capacity - used.get(name, Fraction(0))) / capacity
    return score


def choose_node(
    pod: dict, nodes: list[dict], pods_by_node: dict[str, list[dict]]
) -> tuple[dict | None, str]:
    """(node, "") for the best feasible node, or (None, FailedScheduling message)."""
    feasible = []
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for node in nodes:
        on_node = pods_by_node.get(node["metadata"]["name"], [])
        failures = filter_node(pod, node, on_node)
        if not failures:
            feasible.append(node)
            continue
        reasons.update(failures)
        if any(_unresolvable(r) for r in failures):
            preemption["Preemption is not helpful for scheduling"] += 1
        else:
            preemption["No preemption victims found for incoming pod"] += 1
    if feasible:
        # max() keeps the first of equals: ties go to the first node by name.
        feasible.sort(key=lambda n: n["metadata"]["name"])
        best = max(
            feasible, key=lambda n: _score(pod, n, pods_by_node.get(n["metadata"]["name"], []))
        )
        return best, ""
    return None, failed_scheduling_message(len(nodes), reasons, preemption)


def place(
    pod: dict, nodes: list[dict], pods_by_node: dict[str, list[dict]]
) -> tuple[dict | None, list[Device], str]:
    """Where the default scheduler binds `pod`, with the GPUs the device plugin hands it
    there: (node, devices, "") or (None, [], the FailedScheduling message). The live
    scheduler and history's playback both place pods by it. `pods_by_node`: the pods
    bound to each node (those that ended hold nothing)."""
    node, message = choose_node(pod, nodes, pods_by_node)
    if node is None:
        return None, [], message
    return node, assign_devices(pod, node, pods_by_node.get(node["metadata"]["name"], [])), ""


def _histogram(counter: Counter[str]) -> str:
    # The scheduler sorts "<count> <reason>" strings, count included.
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counter.items()))


def failed_scheduling_message(total: int, reasons: Counter, preemption: Counter) -> str:
    if total == 0:
        return "no nodes available to schedule pods"
    message = f"0/{total} nodes are available: {_histogram(reasons)}."
    return f"{message} preemption: 0/{total} nodes are available: {_histogram(preemption)}."


# --- GPU devices held by pods ---


def held_device_keys(pod: dict) -> list[str]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICES_ANNOTATION, "")
    return [key for key in text.split(",") if key]


def assign_devices(pod: dict, node: dict, pods_on_node: list[dict]) -> list[Device]:
    """The free devices (lowest index first) a pod gets for its extended GPU requests."""
    taken = {key for other in pods_on_node if is_active(other) for key in held_device_keys(other)}
    wanted = {name: int(v) for name, v in pod_requests(pod).items() if is_extended(name)}
    unhealthy = xid.unhealthy_gpus(node)
    assigned = []
    for device in node_devices(node):
        if device.gpu in unhealthy:
            continue  # the device plugin no longer advertises it
        if wanted.get(device.resource, 0) > 0 and device.key not in taken:
            assigned.append(device)
            wanted[device.resource] -= 1
    return assigned
