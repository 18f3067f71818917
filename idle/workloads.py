"""The cluster half of idle actions on Deployments and StatefulSets: scale to
zero keeping the previous replicas in an annotation, bring back from it, and
read a manager's exemption annotation. Each is one GET and at most one PATCH
(a JSON merge patch: it touches only `spec.replicas` and our annotations)."""

from datetime import datetime

from cluster import kube

PREVIOUS_REPLICAS = "gpu-portal.io/idle-previous-replicas"
EXEMPT_UNTIL = "gpu-portal.io/idle-exempt-until"
SCALABLE = ("Deployment", "StatefulSet")
MERGE_PATCH = "application/merge-patch+json"


class NotThere(Exception):
    pass


def _get(kind, namespace, name):
    obj = kube.cluster().get(kind, name, namespace)
    if obj is None:
        raise NotThere(f"{kind} {namespace}/{name} is not in the cluster")
    return obj


def _patch(kind, namespace, name, patch):
    return kube.cluster().call(
        "PATCH", kube.Cluster.path(kind, name, namespace), body=patch, content_type=MERGE_PATCH
    )


def exempt_until(kind, namespace, name):
    """The time in the object's `gpu-portal.io/idle-exempt-until` annotation (ISO
    8601, aware), or None: no such object, no annotation, or not a time."""
    if kind not in SCALABLE:
        return None
    try:
        obj = kube.cluster().get(kind, name, namespace)
    except kube.ClusterError:
        return None
    raw = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(EXEMPT_UNTIL, "")
    try:
        until = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return until if until.tzinfo else None


def scale_to_zero(kind, namespace, name):
    """Scale to zero; the replicas it had. Already at zero with our annotation
    (a retry): the annotation's count, nothing written."""
    obj = _get(kind, namespace, name)
    annotations = obj["metadata"].get("annotations") or {}
    replicas = obj.get("spec", {}).get("replicas", 1)
    if replicas == 0 and PREVIOUS_REPLICAS in annotations:
        return int(annotations[PREVIOUS_REPLICAS])
    _patch(
        kind,
        namespace,
        name,
        {"metadata": {"annotations": {PREVIOUS_REPLICAS: str(replicas)}}, "spec": {"replicas": 0}},
    )
    return replicas


def bring_back(kind, namespace, name):
    """Restore the replicas kept by `scale_to_zero`; how many. Scaled up since by its
    owner (no annotation): left as it is, None."""
    obj = _get(kind, namespace, name)
    annotations = obj["metadata"].get("annotations") or {}
    if PREVIOUS_REPLICAS not in annotations:
        return None
    replicas = int(annotations[PREVIOUS_REPLICAS])
    _patch(
        kind,
        namespace,
        name,
        {"metadata": {"annotations": {PREVIOUS_REPLICAS: None}}, "spec": {"replicas": replicas}},
    )
    return replicas
