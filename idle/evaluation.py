"""What Prometheus says of every GPU workload now, in two queries cluster-wide.

1. `activity`: the highest engine activity of each pod's devices over the
   last `WINDOW` (the billing definition: DCGM_FI_PROF_GR_ENGINE_ACTIVE, or
   GPU_UTIL / 100 where the profiling field is missing, never on MIG).
2. `facts`: who owns each pod, ReplicaSet and Job (kube-state-metrics'
   owner families, billing's `owners_query`), the GPUs each pod requests and
   on which node, and the nodes' labels (which flavor a GPU is, by billing's
   `FlavorResolver`): instant vectors joined with `or` (their label sets
   differ).

A pod's workload is named as the ledger names it (billing's `Owners`): its
ReplicaSet's Deployment, its StatefulSet, its Job (or the Job's CronJob), or
the pod itself. A workload is idle when none of its pods' devices reached the
idle threshold in the window; its GPUs are the sum of its pods' requests.
"""

from dataclasses import dataclass

from django.conf import settings

from billing import prometheus
from billing.metering import FlavorResolver, Owners, _quoted, _regex, owners_query, sanitize

# Longer than the beat's minute, so a late run misses no sample.
WINDOW = "2m"


def queries(resources):
    """The PromQL of one evaluation, by name, for the catalog's `resources`."""
    ns_label = settings.PORTAL_BILLING_LABEL_NAMESPACE
    pod = settings.PORTAL_BILLING_LABEL_POD
    by = f"max by ({ns_label}, {pod})"
    node = settings.PORTAL_BILLING_LABEL_NODE
    wanted = _quoted(_regex(sanitize(resource) for resource in resources))
    return {
        "activity": (
            f'{by} (max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{pod}!=""}}[{WINDOW}]))'
            f' or {by} (max_over_time(DCGM_FI_DEV_GPU_UTIL{{{pod}!="",GPU_I_PROFILE=""}}'
            f"[{WINDOW}]) / 100)"
        ),
        "facts": (
            owners_query()
            + f" or sum by (namespace, pod, {node}, resource) (kube_pod_container_resource_requests"
            f'{{unit="integer",resource=~{wanted}}})'
            " or kube_node_labels"
        ),
    }


@dataclass
class Workload:
    namespace: str
    kind: str  # Deployment, StatefulSet, Job, CronJob, Pod (or a ReplicaSet of none)
    name: str
    flavor_id: int | None  # None: a resource or node no flavor of the catalog names
    gpus: int = 0
    activity: float = 0.0  # the highest reading of any of its devices in the window
    pods: int = 0

    @property
    def key(self):
        return (self.namespace, self.kind, self.name)


def observe(flavors, at=None):
    """{(namespace, kind, name): Workload} of every pod holding GPUs now. Two queries."""
    texts = queries({flavor.resource_name for flavor in flavors})
    activity = prometheus.query(texts["activity"], at=at)
    facts = prometheus.query(texts["facts"], at=at)
    return workloads(activity, facts, flavors)


def workloads(activity, facts, flavors):
    """The pure half of `observe`: Series of the two queries -> workloads."""
    ns_label = settings.PORTAL_BILLING_LABEL_NAMESPACE
    pod_label = settings.PORTAL_BILLING_LABEL_POD
    node_label = settings.PORTAL_BILLING_LABEL_NODE
    owned, requests, node_labels = [], {}, {}
    for series in facts:
        labels = series.labels
        namespace = labels.get("namespace", "")
        if labels.get("__name__") == "kube_node_labels":
            node_labels[labels.get(node_label, "")] = labels
        elif "resource" in labels:
            key = (namespace, labels.get("pod", ""))
            gpus = int(series.points[0][1]) if series.points else 0
            requests[key] = (labels["resource"], labels.get(node_label, ""), gpus)
        else:
            owned.append(series)
    owners = Owners(owned)
    resolve = FlavorResolver(flavors, node_labels)
    found = {}
    for series in activity:
        namespace = series.labels.get(ns_label, "")
        pod = series.labels.get(pod_label, "")
        kind, name = owners.workload(namespace, pod)
        resource, node, gpus = requests.get((namespace, pod), ("", "", 0))
        workload = found.get((namespace, kind, name))
        if workload is None:
            flavor = resolve(resource, node)
            flavor_id = flavor.pk if flavor else None
            workload = found[(namespace, kind, name)] = Workload(namespace, kind, name, flavor_id)
        workload.gpus += gpus
        workload.pods += 1
        reading = max((value for _, value in series.points), default=0.0)
        workload.activity = max(workload.activity, reading)
    return found
