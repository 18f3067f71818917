"""Admission plugins, run inside the store lock on every write of their kind:
LimitRanger and ResourceQuota for pods (in the apiserver's order, see quota.py), the
object-count quota for Jobs, LimitRange defaults, and a new ResourceQuota's status."""

from . import quota
from .errors import Forbidden


def install(store) -> None:
    store.add_admission("pods", _admit_pod)
    store.add_admission("jobs", _admit_job)
    store.add_admission("limitranges", _admit_limit_range)
    store.add_admission("resourcequotas", _admit_quota)


def _admit_pod(operation, pod, old, store) -> None:
    if operation != "CREATE":
        return
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    limit_ranges, _ = store.list_refs("limitranges", namespace)
    problem = quota.apply_limit_ranges(pod, limit_ranges)
    if problem:
        raise Forbidden(resource="pods", name=name, message=problem)
    quotas, _ = store.list_refs("resourcequotas", namespace)
    if not quotas:
        return
    pods, _ = store.list_refs("pods", namespace)
    problem = quota.check_pod(pod, quotas, pods)
    if problem:
        raise Forbidden(resource="pods", name=name, message=problem)


def _admit_job(operation, job, old, store) -> None:
    if operation != "CREATE":
        return
    namespace = job["metadata"]["namespace"]
    quotas, _ = store.list_refs("resourcequotas", namespace)
    if any("count/jobs.batch" in (q.get("spec") or {}).get("hard", {}) for q in quotas):
        existing, _ = store.list_refs("jobs", namespace)
        problem = quota.check_job_count(len(existing), quotas)
        if problem:
            raise Forbidden(
                resource="jobs", group="batch", name=job["metadata"]["name"], message=problem
            )


def _admit_limit_range(operation, limit_range, old, store) -> None:
    quota.default_limit_range(limit_range)


def _admit_quota(operation, resource_quota, old, store) -> None:
    # Fill status at once (the real controller does so within a moment), so a
    # client reading the quota right after creating it sees hard and used.
    namespace = resource_quota["metadata"]["namespace"]
    resource_quota["status"] = quota_status(store, namespace, resource_quota)


def quota_status(store, namespace: str, resource_quota: dict) -> dict:
    """hard and used, counted from the namespace's live pods (and Jobs, when the quota
    counts them), so neither admission nor the controller trusts a stale status."""
    hard = dict((resource_quota.get("spec") or {}).get("hard") or {})
    pods, _ = store.list_refs("pods", namespace)
    job_count = 0
    if "count/jobs.batch" in hard:
        job_count = len(store.list_refs("jobs", namespace)[0])
    return {"hard": hard, "used": quota.used_status(hard, quota.total_usage(pods), job_count)}
