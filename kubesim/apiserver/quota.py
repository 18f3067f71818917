"""ResourceQuota and LimitRange semantics as pure functions over plain dicts.

Mirrors the apiserver's pod admission order: API defaulting (requests default to
limits), LimitRanger defaults, pod validation (extended resources need
requests == limits: 422), then ResourceQuota (403). Usage is always recomputed from
the namespace's live pods, so admission never trusts a stale `status.used`.
"""

from __future__ import annotations

from fractions import Fraction

from kubesim import quantity

# Quota keys that force every container to state the matching request/limit
# (the apiserver's "BACKWARD COMPATIBILITY" constraint for cpu and memory).
_CONSTRAINED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
TERMINAL_PHASES = ("Succeeded", "Failed")


def is_extended(resource: str) -> bool:
    """Extended resources may not overcommit: everything outside kubernetes.io but hugepages."""
    if "/" not in resource:
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _containers(spec: dict, key: str = "containers") -> list[dict]:
    return [c for c in (spec.get(key) or []) if isinstance(c, dict)]


def _resource_map(container: dict, kind: str) -> dict[str, Fraction]:
    values = (container.get("resources") or {}).get(kind) or {}
    return {name: quantity.parse(value) for name, value in values.items()}


def effective(spec: dict, kind: str) -> dict[str, Fraction]:
    """Pod-level requests or limits: the sum over containers, but at least the largest
    init container (init containers run one at a time, before the others)."""
    total: dict[str, Fraction] = {}
    for container in _containers(spec):
        for name, value in _resource_map(container, kind).items():
            total[name] = total.get(name, Fraction(0)) + value
    for container in _containers(spec, "initContainers"):
        for name, value in _resource_map(container, kind).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    return total


def counts_against_quota(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def pod_usage(pod: dict) -> dict[str, Fraction]:
    """What one pod charges to each quota key it touches."""
    spec = pod.get("spec") or {}
    usage = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for name, value in effective(spec, "requests").items():
        usage[f"requests.{name}"] = value
        if name in ("cpu", "memory", "ephemeral-storage"):
            usage[name] = value
    for name, value in effective(spec, "limits").items():
        if not is_extended(name):
            usage[f"limits.{name}"] = value
    return usage


def total_usage(pods: list[dict]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for pod in pods:
        if counts_against_quota(pod):
            for key, value in pod_usage(pod).items():
                total[key] = total.get(key, Fraction(0)) + value
    return total


def used_status(hard: dict[str, str], usage: dict[str, Fraction], jobs: int) -> dict[str, str]:
    """`status.used` for the keys in `hard`, formatted as the apiserver formats them."""
    used = {}
    for key in hard:
        if key == "count/jobs.batch":
            used[key] = str(jobs)
        else:
            used[key] = quantity.format_for(key, usage.get(key, Fraction(0)))
    return used


def _pretty(values: dict[str, Fraction], keys: list[str]) -> str:
    zero = Fraction(0)
    return ",".join(f"{key}={quantity.format_for(key, values.get(key, zero))}" for key in keys)


def missing_requests(pod: dict, hard: dict) -> str | None:
    """ "must specify ..." when a quota caps cpu/memory and a container states nothing."""
    required = {key for key in hard if key in _CONSTRAINED}
    if not required:
        return None
    missing: dict[str, list[str]] = {}
    spec = pod.get("spec") or {}
    for container in _containers(spec) + _containers(spec, "initContainers"):
        stated = set()
        for name in _resource_map(container, "requests"):
            stated |= {name, f"requests.{name}"}
        for name in _resource_map(container, "limits"):
            stated.add(f"limits.{name}")
        for key in required - stated:
            missing.setdefault(key, []).append(container.get("name", ""))
    if not missing:
        return None
    parts = [f"{key} for: {','.join(sorted(missing[key]))}" for key in sorted(missing)]
    return "must specify " + "; ".join(parts)


def check_pod(pod: dict, quotas: list[dict], live_pods: list[dict]) -> str | None:
    """The quota admission message for creating `pod`, or None if it is admitted.

    `live_pods` are the namespace's existing pods (terminal ones are skipped here)."""
    quotas = sorted(quotas, key=lambda q: q["metadata"]["name"])
    for quota in quotas:
        hard = (quota.get("spec") or {}).get("hard") or {}
        problem = missing_requests(pod, hard)
        if problem:
            return f"failed quota: {quota['metadata']['name']}: {problem}"
    if not counts_against_quota(pod):
        return None
    delta = pod_usage(pod)
    used = total_usage(live_pods)
    for quota in quotas:
        hard = (quota.get("spec") or {}).get("hard") or {}
        exceeded = sorted(
            key
            for key in hard
            if key in delta and used.get(key, Fraction(0)) + delta[key] > quantity.parse(hard[key])
        )
        if exceeded:
            limited = {key: quantity.parse(hard[key]) for key in exceeded}
            return (
                f"exceeded quota: {quota['metadata']['name']}, "
                f"requested: {_pretty(delta, exceeded)}, "
                f"used: {_pretty(used, exceeded)}, "
                f"limited: {_pretty(limited, exceeded)}"
            )
    return None


def check_job_count(job_count: int, quotas: list[dict]) -> str | None:
    """Quota check for `count/jobs.batch` when a Job is created."""
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        hard = (quota.get("spec") or {}).get("hard") or {}
        limit = hard.get("count/jobs.batch")
        if limit is not None and job_count + 1 > quantity.parse(limit):
            return (
                f"exceeded quota: {quota['metadata']['name']}, requested: count/jobs.batch=1, "
                f"used: count/jobs.batch={job_count}, limited: count/jobs.batch={limit}"
            )
    return None


# --- LimitRange ---


def default_limit_range(limit_range: dict) -> None:
    """The API defaulting of a LimitRange's Container items (max -> default ->
    defaultRequest, min -> defaultRequest), done when the LimitRange is stored."""
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        default_request = item.setdefault("defaultRequest", {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            default_request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            default_request.setdefault(name, value)
        if not default:
            del item["default"]
        if not default_request:
            del item["defaultRequest"]


def apply_limit_ranges(pod: dict, limit_ranges: list[dict]) -> str | None:
    """LimitRanger: fill missing container limits/requests from the namespace's
    LimitRanges (mutates `pod`), then enforce min/max. Returns a 403 message or None."""
    items = [
        item
        for limit_range in sorted(limit_ranges, key=lambda lr: lr["metadata"]["name"])
        for item in (limit_range.get("spec") or {}).get("limits") or []
        if item.get("type") == "Container"
    ]
    if not items:
        return None
    spec = pod.get("spec") or {}
    containers = _containers(spec) + _containers(spec, "initContainers")
    for item in items:
        for container in containers:
            resources = container.setdefault("resources", {})
            for name, value in (item.get("default") or {}).items():
                resources.setdefault("limits", {}).setdefault(name, str(value))
            for name, value in (item.get("defaultRequest") or {}).items():
                resources.setdefault("requests", {}).setdefault(name, str(value))
    problems = []
    for item in items:
        for container in containers:
            requests = _resource_map(container, "requests")
            limits = _resource_map(container, "limits")
            for name, value in (item.get("min") or {}).items():
                request = requests.get(name)
                if request is not None and request < quantity.parse(value):
                    problems.append(
                        f"minimum {name} usage per Container is {value}, but request is "
                        f"{quantity.format_for(name, request)}"
                    )
            for name, value in (item.get("max") or {}).items():
                limit = limits.get(name)
                if limit is not None and limit > quantity.parse(value):
                    problems.append(
                        f"maximum {name} usage per Container is {value}, but limit is "
                        f"{quantity.format_for(name, limit)}"
                    )
    if not problems:
        return None
    return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
