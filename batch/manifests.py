"""The Kubernetes Job of a batch job, built by a pure function (plain data in, a dict out).

No API calls, no database: tested by comparing output and validated against the
Kubernetes schemas. The name is fixed by the job's id, so a retried create or
release lands on the same object.
"""

from provisioning.manifests import CONTAINER_SECURITY, POD_SECURITY, claim_template

MANAGED_BY = "gpu-portal"
TEAM_LABEL = "gpu-portal.io/team"
JOB_LABEL = "gpu-portal.io/batch-job"
WINDOW_LABEL = "gpu-portal.io/batch-window"
OCCURRENCE_LABEL = "gpu-portal.io/batch-occurrence"
BACKOFF_LIMIT = 3


def job_name(job_id):
    return f"batch-{job_id}"


def _labels(job_id, team_slug, window_id, opens_at):
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        TEAM_LABEL: team_slug,
        JOB_LABEL: str(job_id),
        WINDOW_LABEL: str(window_id or "none"),
        OCCURRENCE_LABEL: occurrence_value(opens_at),
    }


def batch_claim_template(
    *,
    job_id,
    namespace,
    team_slug,
    window_id,
    opens_at,
    device_class,
    device_selector,
    gpus,
    owner_uid,
):
    """The ResourceClaimTemplate a DRA job's pods claim their devices from: the
    flavor's DeviceClass and selector, `gpus` devices a pod. Named as the Job, so a
    retried apply lands on it, and owned by the Job (`owner_uid`), so it is
    deleted with it; each pod's claim goes with the pod."""
    template = claim_template(
        namespace=namespace,
        name=job_name(job_id),
        device_class=device_class,
        device_selector=device_selector,
        gpus=gpus,
    )
    template["metadata"]["labels"] = _labels(job_id, team_slug, window_id, opens_at)
    template["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job_name(job_id), "uid": owner_uid}
    ]
    return template


def occurrence_value(opens_at):
    """A label value for an occurrence: its opening instant, e.g. 20261204T2200Z."""
    return f"{opens_at:%Y%m%dT%H%MZ}" if opens_at else "none"


def _env(entries):
    env = []
    for entry in entries:
        if "secret" in entry:
            ref = {"name": entry["secret"]["name"], "key": entry["secret"]["key"]}
            env.append({"name": entry["name"], "valueFrom": {"secretKeyRef": ref}})
        else:
            env.append({"name": entry["name"], "value": entry["value"]})
    return env


def may_run_on(labels, *, spot_allowed, spot_label):
    """True if the pods of a job with `spot_allowed` (the job's and its window's) may
    land on a node with `labels`, as far as spot goes: the rule the affinity of
    `_spot_scheduling` writes (`NotIn` the spot label's value: a node without the key
    is not spot)."""
    key, _, value = spot_label.partition("=")
    return spot_allowed or labels.get(key) != value


def _spot_scheduling(spot_allowed, spot_label):
    """Tolerate and prefer spot nodes where allowed; keep off them where not."""
    key, _, value = spot_label.partition("=")
    if spot_allowed:
        toleration = {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}
        preferred = {
            "weight": 100,
            "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
        }
        return [toleration], {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}
        }
    required = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]}
        ]
    }
    return [], {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def batch_job(
    *,
    job_id,
    namespace,
    team_slug,
    window_id,
    opens_at,
    image,
    command,
    args,
    env,
    resource_name,
    gpus_per_pod,
    parallelism,
    completions,
    node_selector,
    tolerations,
    spot_allowed,
    spot_label,
    suspend=True,
    active_deadline_seconds=None,
    annotations=None,
    dra=False,
):
    """A `batch/v1` Job, suspended until released. Spot jobs ignore pod disruptions
    (a reclaimed pod is replaced in place without counting as a failure).

    `dra`: the job's flavor is held by DRA: each pod gets a claim made from the
    job's ResourceClaimTemplate (`batch_claim_template`, same name) instead of
    `resources.limits` of an extended resource."""
    labels = _labels(job_id, team_slug, window_id, opens_at)
    if dra:
        resources = {"claims": [{"name": "gpus"}]}
    else:
        limits = {resource_name: str(gpus_per_pod)}
        resources = {"limits": limits, "requests": dict(limits)}
    container = {
        "name": "main",
        "image": image,
        "resources": resources,
        "securityContext": CONTAINER_SECURITY,
    }
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = _env(env)
    spot_tolerations, affinity = _spot_scheduling(spot_allowed, spot_label)
    pod_spec = {
        "restartPolicy": "Never",
        "securityContext": POD_SECURITY,
        "containers": [container],
        "nodeSelector": dict(node_selector),
        "tolerations": [*tolerations, *spot_tolerations],
        "affinity": affinity,
    }
    if dra:
        pod_spec["resourceClaims"] = [
            {"name": "gpus", "resourceClaimTemplateName": job_name(job_id)}
        ]
    spec = {
        "suspend": suspend,
        "parallelism": parallelism,
        "completions": completions,
        "backoffLimit": BACKOFF_LIMIT,
        "template": {
            "metadata": {"labels": labels, "annotations": dict(annotations or {})},
            "spec": pod_spec,
        },
    }
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    if spot_allowed:
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(job_id), "namespace": namespace, "labels": labels},
        "spec": spec,
    }
