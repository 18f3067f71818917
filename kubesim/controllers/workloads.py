"""The apps/v1 controllers' decisions as pure functions (Deployment, ReplicaSet,
StatefulSet), in the way `jobs.reconcile` is for Jobs: they look at an object and
what it owns and say what should exist; the control loop carries it out.

What they do as kube-controller-manager does: a Deployment owns one ReplicaSet
per pod template (`<deployment>-<pod-template-hash>`, the hash also a label of it
and of its pods); the ReplicaSet owns `<replicaset>-xxxxx` pods and keeps as many
as its replicas (extra ones go unscheduled first, then pending, not ready, newest);
a StatefulSet owns `<name>-<ordinal>` pods, made in order and each only once the
one before is Running and Ready (OrderedReady; Parallel: all at once), removed from
the highest ordinal down, one at a time. Simplified: a changed template replaces
the old ReplicaSet at once (no surge, as if maxUnavailable were 100%), old
ReplicaSets are kept (no revisionHistoryLimit clean-up), no ControllerRevisions.
"""

from __future__ import annotations

import copy
import hashlib
import math

from kubesim.apiserver.selectors import labels_match, selector_from_label_selector
from kubesim.controllers.jobs import pod_name

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
STS_REVISION_LABEL = "controller-revision-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX = "apps.kubernetes.io/pod-index"
# rand.SafeEncodeString's alphabet (no vowels, no look-alikes).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: dict, collision_count: int = 0) -> str:
    """A short stable name for a pod template (upstream: an FNV-32a of its Go dump,
    safe-encoded; the value differs, the shape is the same)."""
    digest = hashlib.sha256(repr((_canonical(template), collision_count)).encode()).digest()
    number = int.from_bytes(digest[:4], "big")
    return "".join(_SAFE[int(d) % len(_SAFE)] for d in str(number))[:10]


def _canonical(value):
    if isinstance(value, dict):
        return sorted((k, _canonical(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def owner_ref(owner: dict) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: dict, owner: dict) -> bool:
    uid = owner["metadata"]["uid"]
    return any(
        r.get("controller") and r.get("uid") == uid
        for r in obj["metadata"].get("ownerReferences") or ()
    )


def is_active(pod: dict) -> bool:
    """controller.IsPodActive: not finished, not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _running_and_ready(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)


def _counts(pods: list[dict]) -> tuple[int, int]:
    active = [p for p in pods if is_active(p)]
    return len(active), sum(1 for p in active if is_ready(p))


def _omit_zero(status: dict, keys) -> dict:
    """Go's `omitempty` on int32 counters: a real server never shows them at 0."""
    return {k: v for k, v in status.items() if not (k in keys and v == 0)}


# --- Deployment -> ReplicaSets ---


def _surge(deployment: dict, replicas: int) -> int:
    rolling = ((deployment["spec"].get("strategy") or {}).get("rollingUpdate")) or {}
    surge = rolling.get("maxSurge", 0)
    if isinstance(surge, str) and surge.endswith("%"):
        return math.ceil(replicas * int(surge[:-1]) / 100)
    return int(surge or 0)


def new_replica_set(deployment: dict, template_hash_: str, revision: int) -> dict:
    """The ReplicaSet a Deployment makes for its current template."""
    meta, spec = deployment["metadata"], deployment["spec"]
    template = copy.deepcopy(spec["template"])
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), HASH_LABEL: template_hash_}
    selector = copy.deepcopy(spec["selector"])
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: template_hash_}
    replicas = spec["replicas"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{template_hash_}",
            "namespace": meta["namespace"],
            "labels": template_meta["labels"],
            "annotations": replica_set_annotations(deployment, revision),
            "ownerReferences": [owner_ref(deployment)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": spec.get("minReadySeconds", 0),
            "selector": selector,
            "template": template,
        },
    }


def replica_set_annotations(deployment: dict, revision: int) -> dict:
    replicas = deployment["spec"]["replicas"]
    return {
        "deployment.kubernetes.io/desired-replicas": str(replicas),
        "deployment.kubernetes.io/max-replicas": str(replicas + _surge(deployment, replicas)),
        REVISION: str(revision),
    }


def current_replica_set(deployment: dict, replica_sets: list[dict]) -> dict | None:
    """The owned ReplicaSet whose template is the Deployment's (ignoring the hash label)."""
    wanted = deployment["spec"]["template"]
    for rs in replica_sets:
        template = copy.deepcopy(rs["spec"]["template"])
        (template.get("metadata") or {}).get("labels", {}).pop(HASH_LABEL, None)
        if _canonical(template) == _canonical(wanted):
            return rs
    return None


def deployment_status(deployment: dict, replica_sets: list[dict], new: dict | None, now: str):
    """DeploymentStatus from the ReplicaSets' statuses (calculateStatus)."""
    spec, old = deployment["spec"], deployment.get("status") or {}
    statuses = [rs.get("status") or {} for rs in replica_sets]
    available = sum(s.get("availableReplicas", 0) for s in statuses)
    status = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": sum(s.get("replicas", 0) for s in statuses),
        "updatedReplicas": ((new or {}).get("status") or {}).get("replicas", 0),
        "readyReplicas": sum(s.get("readyReplicas", 0) for s in statuses),
        "availableReplicas": available,
        "unavailableReplicas": max(0, spec["replicas"] - available),
        "terminatingReplicas": sum(s.get("terminatingReplicas", 0) for s in statuses),
    }
    minimum = spec["replicas"] - _max_unavailable(deployment)
    ok = available >= minimum
    conditions = {c["type"]: c for c in old.get("conditions") or []}
    _condition(
        conditions,
        "Available",
        "True" if ok else "False",
        "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
        "Deployment has minimum availability."
        if ok
        else "Deployment does not have minimum availability.",
        now,
    )
    if new is not None:
        name = new["metadata"]["name"]
        done = status["updatedReplicas"] == spec["replicas"] == available
        reason, message = (
            ("NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.')
            if done
            else ("ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.')
        )
        _condition(conditions, "Progressing", "True", reason, message, now)
    status["conditions"] = [conditions[k] for k in ("Available", "Progressing") if k in conditions]
    if old.get("collisionCount"):
        status["collisionCount"] = old["collisionCount"]
    counters = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    return _omit_zero(status, counters + ("unavailableReplicas",))


def _max_unavailable(deployment: dict) -> int:
    replicas = deployment["spec"]["replicas"]
    rolling = ((deployment["spec"].get("strategy") or {}).get("rollingUpdate")) or {}
    value = rolling.get("maxUnavailable", 0)
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(replicas * int(value[:-1]) / 100)
    return int(value or 0)


def _condition(conditions: dict, kind: str, value: str, reason: str, message: str, now: str):
    current = conditions.get(kind)
    if current and (current["status"], current.get("reason")) == (value, reason):
        if current.get("message") != message:
            conditions[kind] = {**current, "message": message, "lastUpdateTime": now}
        return
    conditions[kind] = {
        "type": kind,
        "status": value,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


# --- ReplicaSet -> pods ---


def pod_from_template(owner: dict, name: str, extra_labels: dict | None = None) -> dict:
    """The pod a ReplicaSet or StatefulSet makes from its template."""
    template = copy.deepcopy(owner["spec"]["template"])
    meta = template.get("metadata") or {}
    pod_meta = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": {**(meta.get("labels") or {}), **(extra_labels or {})},
        "ownerReferences": [owner_ref(owner)],
    }
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    if owner["kind"] == "ReplicaSet":
        pod_meta["generateName"] = f"{owner['metadata']['name']}-"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}


def replica_set_pod(rs: dict, rng) -> dict:
    return pod_from_template(rs, pod_name(rs["metadata"]["name"], rng))


def owned_pods(owner: dict, pods: list[dict]) -> list[dict]:
    selector = selector_from_label_selector(owner["spec"].get("selector"))
    return [
        p
        for p in pods
        if controlled_by(p, owner) and labels_match(selector, p["metadata"].get("labels"))
    ]


def _deletion_rank(pod: dict):
    """controller.ActivePods order: the first ones go first on a scale-down."""
    status = pod.get("status") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase"), 0)
    created = pod["metadata"].get("creationTimestamp", "")
    return (
        bool(pod["spec"].get("nodeName")),
        phase_rank,
        is_ready(pod),
        _negated(created),
    )


def _negated(text: str) -> tuple:
    return tuple(-ord(c) for c in text)  # newest first


def replica_set_diff(rs: dict, pods: list[dict]) -> tuple[int, list[dict]]:
    """(pods to create, pods to delete) to reach the ReplicaSet's replicas."""
    active = [p for p in pods if is_active(p)]
    diff = rs["spec"]["replicas"] - len(active)
    if diff >= 0:
        return diff, []
    return 0, sorted(active, key=_deletion_rank)[:-diff]


def terminating(pods: list[dict]) -> int:
    """Pods being deleted and not finished (DeploymentReplicaSetTerminatingReplicas)."""
    return sum(
        1
        for p in pods
        if p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


def replica_set_status(rs: dict, pods: list[dict]) -> dict:
    """ReplicaSetStatus (replicas is not omitempty; the counters are, but not
    terminatingReplicas, a pointer)."""
    active, ready = _counts(pods)
    template_labels = (rs["spec"]["template"].get("metadata") or {}).get("labels") or {}
    selector = selector_from_label_selector({"matchLabels": template_labels})
    labelled = [p for p in pods if is_active(p) and labels_match(selector, p["metadata"]["labels"])]
    status = {
        "replicas": active,
        "fullyLabeledReplicas": len(labelled),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "terminatingReplicas": terminating(pods),
        "observedGeneration": rs["metadata"].get("generation", 1),
    }
    return _omit_zero(status, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"))


# --- StatefulSet -> pods ---


def stateful_set_revision(sts: dict) -> str:
    return f"{sts['metadata']['name']}-{template_hash(sts['spec']['template'])}"


def stateful_set_pod(sts: dict, ordinal: int) -> dict:
    name = f"{sts['metadata']['name']}-{ordinal}"
    labels = {
        STS_REVISION_LABEL: stateful_set_revision(sts),
        STS_POD_NAME: name,
        STS_POD_INDEX: str(ordinal),
    }
    pod = pod_from_template(sts, name, labels)
    pod["spec"]["hostname"] = name
    if sts["spec"].get("serviceName"):
        pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
    return pod


def ordinal(sts: dict, pod: dict) -> int | None:
    prefix = sts["metadata"]["name"] + "-"
    name = pod["metadata"]["name"]
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def stateful_set_step(sts: dict, pods: list[dict]) -> tuple[list[int], list[str]]:
    """(ordinals to create, pod names to delete) now. OrderedReady: one at a time,
    each created once all below it are Running and Ready, the highest condemned pod
    deleted once no other is terminating; Parallel: all at once. A finished pod is
    deleted so that it is made again."""
    replicas = sts["spec"]["replicas"]
    parallel = sts["spec"].get("podManagementPolicy") == "Parallel"
    by_ordinal = {n: p for p in pods if (n := ordinal(sts, p)) is not None}
    finished = [
        p["metadata"]["name"]
        for p in by_ordinal.values()
        if not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    ]
    if finished:
        return [], finished
    create = []
    for n in range(replicas):
        pod = by_ordinal.get(n)
        if pod is None:
            create.append(n)
            if not parallel:
                return create, []
        elif not parallel and not _running_and_ready(pod):
            return [], []  # wait for it
    condemned = sorted((n for n in by_ordinal if n >= replicas), reverse=True)
    if not parallel:
        if any(by_ordinal[n]["metadata"].get("deletionTimestamp") for n in by_ordinal):
            return create, []
        condemned = condemned[:1]
    live = [n for n in condemned if not by_ordinal[n]["metadata"].get("deletionTimestamp")]
    return create, [by_ordinal[n]["metadata"]["name"] for n in live]


def stateful_set_status(sts: dict, pods: list[dict]) -> dict:
    revision = stateful_set_revision(sts)
    active = [p for p in pods if is_active(p)]
    ready = sum(1 for p in active if is_ready(p))
    current = sum(1 for p in active if p["metadata"]["labels"].get(STS_REVISION_LABEL) == revision)
    status = {
        "observedGeneration": sts["metadata"].get("generation", 1),
        "replicas": len(active),
        "readyReplicas": ready,
        "currentReplicas": current,
        "updatedReplicas": current,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
        "availableReplicas": ready,
    }
    return _omit_zero(status, ("readyReplicas", "currentReplicas", "updatedReplicas"))
