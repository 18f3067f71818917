"""The cluster half of idle actions on Deployments and StatefulSets: read how
many replicas one runs, scale it to zero, bring it back to a count. Each is one
GET or one PATCH (a JSON merge patch: it touches only `spec.replicas` and our
annotation).

Nothing here is read back from the cluster as a decision. The members of a
team hold `edit` in its namespace and can write any annotation on their
workloads, so whether a workload is exempt (`idle.models.Exemption`, made by a
manager through `idle.actions.exempt`) and how many replicas it had before the
portal scaled it down (`IdleState.previous_replicas`) are the database's. The
replicas annotation is a mirror the portal writes for people reading the object
with kubectl, never an input; an exemption annotation is ignored and logged.
"""

import logging

from cluster import kube

log = logging.getLogger(__name__)

PREVIOUS_REPLICAS = "gpu-portal.io/idle-previous-replicas"
# Read by earlier versions as a manager's exemption; anyone with `edit` could
# write it, so it is ignored (logged when seen on a workload acted on).
IGNORED_EXEMPTION = "gpu-portal.io/idle-exempt-until"
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


def replicas(kind, namespace, name):
    """The replicas the workload asks for now (its spec: 1 when unset). One GET."""
    obj = _get(kind, namespace, name)
    annotations = obj["metadata"].get("annotations") or {}
    if IGNORED_EXEMPTION in annotations:
        log.warning(
            "%s %s/%s: annotation %s=%r ignored; exemptions are made by a team manager "
            "in the portal",
            kind,
            namespace,
            name,
            IGNORED_EXEMPTION,
            annotations[IGNORED_EXEMPTION][:100],
        )
    return (obj.get("spec") or {}).get("replicas", 1)


def scale_to_zero(kind, namespace, name, *, previous):
    """Scale to zero, noting `previous` (what the portal recorded it had) on the
    object for whoever reads it with kubectl. One PATCH."""
    _patch(
        kind,
        namespace,
        name,
        {"metadata": {"annotations": {PREVIOUS_REPLICAS: str(previous)}}, "spec": {"replicas": 0}},
    )


def bring_back(kind, namespace, name, *, replicas):
    """Scale back to `replicas` (the portal's record) and take the note off; how
    many. Scaled up since by its owner: left as it is, None. A GET and a PATCH."""
    obj = _get(kind, namespace, name)
    if (obj.get("spec") or {}).get("replicas", 1) != 0:
        return None
    _patch(
        kind,
        namespace,
        name,
        {"metadata": {"annotations": {PREVIOUS_REPLICAS: None}}, "spec": {"replicas": replicas}},
    )
    return replicas
