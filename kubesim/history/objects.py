"""The objects a played workload makes, as the API would hold them: its Jobs and pods
(`Live`), with the uids and templates the live cluster would give them."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from kubesim.clock import format_time
from kubesim.controllers import jobs

from .workload import MANAGED_BY, TEAM_LABEL, Run, as_datetime


def object_uid(*parts) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kubesim-history/" + "/".join(map(str, parts))))


def _pod_template(run: Run, namespace_labels: dict) -> dict:
    entry = run.entry
    count = str(entry.gpus)
    team = namespace_labels.get(TEAM_LABEL)
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY, TEAM_LABEL: team} if team else {}
    labels.update(entry.labels)
    return {
        "metadata": {
            "labels": labels,
            "annotations": {
                **entry.annotations,
                "kubesim.io/duration": f"{entry.duration:.3f}".rstrip("0").rstrip(".") + "s",
                "kubesim.io/exit-code": str(entry.exit_code),
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": dict(entry.node_selector),
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "limits": {entry.resource: count},
                        "requests": {entry.resource: count},
                    },
                }
            ],
        },
    }


@dataclass
class Live:
    """One run while its objects exist: a pod (and its Job)."""

    run: Run
    pod: dict
    job: dict | None
    created: float
    devices: list = field(default_factory=list)
    prefixes: dict = field(default_factory=dict)  # device key -> DCGM series prefixes
    node: dict | None = None
    started: float | None = None
    ends: float | None = None
    gone: float | None = None  # when the objects are deleted
    # Cut short by an incident: its status then (pod, time) -> status, and how long the
    # pod stays listed after.
    ending: object = None
    kept: float | None = None


def new_live(run: Run, namespace_labels: dict, at: float) -> Live:
    entry = run.entry
    stamp = format_time(as_datetime(at))
    template = _pod_template(run, namespace_labels)
    job = None
    if entry.kind == "Job":
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": run.name,
                "namespace": entry.namespace,
                "uid": object_uid(entry.namespace, "job", run.name),
                "labels": dict(template["metadata"]["labels"]),
                "creationTimestamp": stamp,
            },
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": template,
            },
        }
        rng = random.Random(f"{entry.namespace}/{run.name}")
        pod = jobs.pod_from_template(job, jobs.pod_name(run.name, rng))
    else:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": run.name, **template["metadata"]},
        }
        pod["spec"] = template["spec"]
    pod["metadata"].update(
        namespace=entry.namespace,
        uid=object_uid(entry.namespace, "pod", pod["metadata"]["name"]),
        creationTimestamp=stamp,
    )
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    # The Job's status is made when it is first needed: most runs are placed in the
    # step they are created in, and reconciling twice would be wasted.
    return Live(run=run, pod=pod, job=job, created=at)


def sync_job(live: Live, at: float) -> None:
    if live.job is not None:
        status = jobs.reconcile(live.job, [live.pod], as_datetime(at)).status
        live.job = {**live.job, "status": status}
