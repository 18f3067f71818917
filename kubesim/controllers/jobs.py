"""The batch/v1 Job controller's decisions as a pure function.

`reconcile(job, pods, now)` looks at a Job and the pods it owns and says what to do:
the new status, how many pods to create, which to delete, which events to record
and whether the Job's TTL has run out. The control loop carries the actions out.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubesim.clock import format_time, parse_time

# Alphabet of the apiserver's generateName suffixes (no vowels, no look-alikes).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL = ("Complete", "Failed")
_POD_TERMINAL = ("Succeeded", "Failed")
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


# kube-controller-manager's job controller waits before replacing failed pods:
# DefaultJobPodFailureBackOff, doubling per consecutive failure, MaxJobPodFailureBackOff.
POD_FAILURE_BACK_OFF = 10.0
MAX_POD_FAILURE_BACK_OFF = 360.0


@dataclass(frozen=True)
class FailureBackoff:
    """The job controller's backoffRecord: failures since the last success and when
    the latest of them ended. It lives in the controller's memory, as upstream."""

    failures: int = 0
    last_failure: datetime | None = None

    def after(self, succeeded: list[dict], failed: list[dict]) -> FailureBackoff:
        """The record once these newly finished pods are counted (newBackoffRecord)."""
        if not failed:
            return self if not succeeded else FailureBackoff()
        failed_at = sorted(finished_at(p) for p in failed)
        if not succeeded:
            return FailureBackoff(self.failures + len(failed), failed_at[-1])
        last_success = max(finished_at(p) for p in succeeded)
        after_success = [moment for moment in failed_at if moment > last_success]
        return FailureBackoff(len(after_success), after_success[-1] if after_success else None)

    def remaining(self, now: datetime) -> float:
        """Seconds before a pod may be created (getRemainingTimeForFailuresCount)."""
        if not self.failures or self.last_failure is None:
            return 0.0
        wait = min(POD_FAILURE_BACK_OFF * 2 ** (self.failures - 1), MAX_POD_FAILURE_BACK_OFF)
        return max(0.0, wait - (now - self.last_failure).total_seconds())


def finished_at(pod: dict) -> datetime:
    """When a finished pod ended, as the job controller's getFinishedTime reads it: its
    Ready condition turning False, else its containers' last finishedAt, else its
    deletion, else its creation."""
    status = pod.get("status") or {}
    ready = condition(status.get("conditions") or [], "Ready")
    if ready and ready.get("status") == "False" and ready.get("lastTransitionTime"):
        return parse_time(ready["lastTransitionTime"])
    ends = [
        parse_time(terminated["finishedAt"])
        for container in status.get("containerStatuses") or []
        if (terminated := (container.get("state") or {}).get("terminated"))
        and terminated.get("finishedAt")
    ]
    if ends:
        return max(ends)
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        grace = meta.get("deletionGracePeriodSeconds") or 0
        return parse_time(meta["deletionTimestamp"]) - timedelta(seconds=grace)
    return parse_time(meta["creationTimestamp"])


@dataclass
class Actions:
    status: dict
    backoff: FailureBackoff = FailureBackoff()
    create: int = 0
    delete: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    delete_job: bool = False
    untrack: list[str] = field(default_factory=list)  # pods counted now: drop the finalizer


def condition(conditions: list[dict], kind: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_finished(job: dict) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any((condition(conditions, k) or {}).get("status") == "True" for k in _TERMINAL)


def _set_condition(status: dict, kind: str, value: str, reason: str, message: str, now: str):
    conditions = status.setdefault("conditions", [])
    current = condition(conditions, kind)
    if current and current["status"] == value and current.get("reason") == reason:
        return  # unchanged: rewriting probe times would make every sync a write
    fresh = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    if current:
        current.update(fresh)
    else:
        conditions.append(fresh)


def _pod_condition(pod: dict, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _exit_codes(pod: dict) -> list[tuple[str, int]]:
    codes = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            codes.append((status["name"], terminated["exitCode"]))
    return codes


def failure_policy_action(job: dict, pod: dict) -> tuple[str, str]:
    """(action, message) of the first podFailurePolicy rule matching a failed pod;
    ("Count", "") when none does."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    pod_name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    for index, rule in enumerate(rules):
        for wanted in rule.get("onPodConditions") or []:
            if _pod_condition(pod, wanted.get("type")) and wanted.get("status", "True") == "True":
                return rule["action"], (
                    f"Pod {pod_name} has condition {wanted['type']} matching "
                    f"{rule['action']} rule at index {index}"
                )
        exit_rule = rule.get("onExitCodes")
        if exit_rule:
            values = set(exit_rule.get("values") or [])
            for container, code in _exit_codes(pod):
                if exit_rule.get("containerName") not in (None, container):
                    continue
                if (code in values) == (exit_rule.get("operator", "In") == "In"):
                    return rule["action"], (
                        f"Container {container} for pod {pod_name} failed with exit code "
                        f"{code} matching {rule['action']} rule at index {index}"
                    )
    return "Count", ""


def _restarts(pod: dict) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    statuses += (pod.get("status") or {}).get("initContainerStatuses") or []
    return sum(s.get("restartCount", 0) for s in statuses)


def _finish_time(status: dict) -> datetime | None:
    if status.get("completionTime"):
        return parse_time(status["completionTime"])
    failed = condition(status.get("conditions") or [], "Failed")
    return parse_time(failed["lastTransitionTime"]) if failed else None


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def tracked(pod: dict) -> bool:
    return TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ())


def terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp")) and _phase(pod) not in _POD_TERMINAL


def only_replace_failed(job: dict) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def _considered_failed(pod: dict, job: dict) -> bool:
    """The job controller's isPodFailed: a deleted pod counts as failed at once unless
    the Job waits for pods to reach phase Failed (podReplacementPolicy: Failed, which a
    podFailurePolicy implies)."""
    if _phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return bool(pod["metadata"].get("deletionTimestamp")) and _phase(pod) != "Succeeded"


def _finish(status: dict, target: dict, stamp: str, actions: Actions) -> None:
    """Turn FailureTarget / SuccessCriteriaMet into Failed / Complete."""
    reason, message = target["reason"], target["message"]
    if target["type"] == "FailureTarget":
        _set_condition(status, "Failed", "True", reason, message, stamp)
        actions.events.append(("Warning", reason, message))
    else:
        status["completionTime"] = stamp
        _set_condition(status, "Complete", "True", reason, message, stamp)
        actions.events.append(("Normal", "Completed", "Job completed"))


def reconcile(
    job: dict, pods: list[dict], now: datetime, backoff: FailureBackoff = FailureBackoff()
) -> Actions:
    """Decide the next step for `job`, given the pods it controls (pure).

    Pods carry the batch.kubernetes.io/job-tracking finalizer until counted: a
    finished pod is counted once, then its finalizer is removed (Actions.untrack), so
    counts survive the pod's deletion. Pods the controller deletes itself (suspend,
    surplus, a finished Job) lose the finalizer first and never count.

    `backoff` is the Job's failure record; pods are created only once its wait is over,
    and Actions.backoff is the record with this sync's finished pods counted."""
    spec = job.get("spec") or {}
    old_status = job.get("status") or {}
    status = copy.deepcopy(old_status)
    stamp = format_time(now)

    if is_finished(job):
        ttl = spec.get("ttlSecondsAfterFinished")
        finished_at = _finish_time(status)
        expired = ttl is not None and finished_at and now >= finished_at + timedelta(seconds=ttl)
        untrack = [p["metadata"]["name"] for p in pods if tracked(p)]
        return Actions(status=status, delete_job=bool(expired), untrack=untrack)

    actions = Actions(status=status)
    active = [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp") and _phase(p) not in _POD_TERMINAL
    ]
    leaving = [p for p in pods if terminating(p)]
    new_succeeded = new_failed = 0
    finished: dict[str, list[dict]] = {"succeeded": [], "failed": []}
    fail_job_message = ""
    for pod in pods:
        if not tracked(pod):
            continue  # counted in an earlier sync, or deleted by this controller
        if _phase(pod) == "Succeeded":
            new_succeeded += 1
            finished["succeeded"].append(pod)
        elif _considered_failed(pod, job):
            finished["failed"].append(pod)
            action, message = failure_policy_action(job, pod)
            if action == "FailJob" and not fail_job_message:
                fail_job_message = message
            if action != "Ignore":
                new_failed += 1
        else:
            continue
        actions.untrack.append(pod["metadata"]["name"])
    actions.backoff = backoff.after(finished["succeeded"], finished["failed"])
    status["succeeded"] = old_status.get("succeeded", 0) + new_succeeded
    status["failed"] = old_status.get("failed", 0) + new_failed
    status["ready"] = sum(1 for p in active if _pod_condition(p, "Ready"))
    status["terminating"] = len(leaving)
    status.setdefault("uncountedTerminatedPods", {})

    conditions = status.get("conditions") or []
    target = next(
        (
            c
            for c in conditions
            if c["type"] in ("FailureTarget", "SuccessCriteriaMet") and c["status"] == "True"
        ),
        None,
    )
    if target:
        # Decided already: the terminal condition waits until no pod is terminating.
        actions.delete = [p["metadata"]["name"] for p in active]
        status["active"] = status["ready"] = 0
        if not active and not leaving:
            _finish(status, target, stamp, actions)
        return actions

    suspended = bool(spec.get("suspend"))
    suspend_condition = condition(conditions, "Suspended")
    was_suspended = bool(suspend_condition and suspend_condition["status"] == "True")
    if suspended:
        actions.delete = [p["metadata"]["name"] for p in active]
        status["active"] = 0
        if not was_suspended:
            _set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", stamp)
            actions.events.append(("Normal", "Suspended", "Job suspended"))
        return actions
    if was_suspended:
        _set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", stamp)
        actions.events.append(("Normal", "Resumed", "Job resumed"))
        # Resuming restarts the activeDeadlineSeconds clock.
        status["startTime"] = stamp
    status.setdefault("startTime", stamp)

    deadline = spec.get("activeDeadlineSeconds")
    started = parse_time(status["startTime"])
    restart_policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    backoff_limit = spec.get("backoffLimit", 6)
    if restart_policy == "OnFailure":
        past_backoff = sum(_restarts(p) for p in active) + status["failed"] > backoff_limit
    else:
        past_backoff = status["failed"] > backoff_limit

    failure = None
    if fail_job_message:
        failure = ("PodFailurePolicy", fail_job_message)
    elif deadline is not None and now >= started + timedelta(seconds=deadline):
        failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
    elif past_backoff:
        failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    completions = spec.get("completions")
    done = (
        status["succeeded"] >= completions
        if completions is not None
        else status["succeeded"] > 0 and not active
    )
    if failure or done:
        if failure:
            reason, message = failure
            _set_condition(status, "FailureTarget", "True", reason, message, stamp)
            # Pods still running when the Job fails count as failed.
            status["failed"] += len(active)
        else:
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
            _set_condition(status, "SuccessCriteriaMet", "True", reason, message, stamp)
        actions.delete = [p["metadata"]["name"] for p in active]
        status["active"] = status["ready"] = 0
        if not active and not leaving:
            _finish(
                status,
                condition(
                    status["conditions"], "FailureTarget" if failure else "SuccessCriteriaMet"
                ),
                stamp,
                actions,
            )
        return actions

    parallelism = spec.get("parallelism", 1)
    if completions is not None:
        wanted = min(parallelism, completions - status["succeeded"])
    else:
        wanted = 0 if status["succeeded"] else parallelism
    # With podReplacementPolicy Failed a terminating pod still holds its place.
    present = len(active) + (len(leaving) if only_replace_failed(job) else 0)
    if present < wanted and not actions.backoff.remaining(now):
        actions.create = wanted - present
    elif len(active) > wanted:
        actions.delete = [p["metadata"]["name"] for p in active[wanted:]]
    status["active"] = min(len(active), wanted)
    return actions


def pod_name(job_name: str, rng: random.Random | None = None) -> str:
    """`<job>-xxxxx` as generateName would make it (job names are capped at 63 - 6)."""
    rng = rng or random.Random()
    suffix = "".join(rng.choice(_NAME_ALPHABET) for _ in range(5))
    return f"{job_name[:57]}-{suffix}"


def pod_from_template(job: dict, name: str) -> dict:
    """The pod a Job creates: its template plus the owner reference and job labels."""
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    meta = template.get("metadata") or {}
    job_meta = job["metadata"]
    labels = dict(meta.get("labels") or {})
    labels.setdefault("batch.kubernetes.io/controller-uid", job_meta["uid"])
    labels.setdefault("batch.kubernetes.io/job-name", job_meta["name"])
    labels.setdefault("controller-uid", job_meta["uid"])
    labels.setdefault("job-name", job_meta["name"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{job_meta['name']}-",
            "namespace": job_meta["namespace"],
            "labels": labels,
            "annotations": dict(meta.get("annotations") or {}),
            "finalizers": [TRACKING_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job_meta["name"],
                    "uid": job_meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template.get("spec") or {},
    }
