"""The kubelet stand-in: pod status transitions and logs as pure functions of sim time.

A pod's behaviour is set by annotations (all optional):
  kubesim.io/duration         how long each run lasts ("300s", "5m", "1h", "90"); default 180s
  kubesim.io/exit-code        exit code of a run; default 0 (Succeeded)
  kubesim.io/fail-attempts    only the first N runs exit with exit-code, later runs exit 0
  kubesim.io/gpu-profile      busy | idle | bursty (default busy)
  kubesim.io/gpu-util         utilisation percent 0-100, overrides the profile's level
  kubesim.io/disrupt-after    fail the pod this long after it started, with a
                              DisruptionTarget condition (spot reclaim / preemption)
  kubesim.io/disruption-reason  reason on that condition; default TerminationByKubelet
  kubesim.io/log              extra text the container prints at start
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

from kubesim.clock import format_time, parse_time
from kubesim.store import DISRUPTION_TARGET, set_pod_condition

PREFIX = "kubesim.io/"
DEFAULT_DURATION = 180.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}


def parse_duration(text: str | None, default: float = DEFAULT_DURATION) -> float:
    """Seconds from "300s", "5m", "1h", "1h30m" or a bare number of seconds."""
    if text is None:
        return default
    text = str(text).strip()
    match = _DURATION.match(text)
    if match:
        return float(match.group(1)) * _UNITS[match.group(2)]
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if parts and "".join(a + b for a, b in parts) == text:
        return sum(float(a) * _UNITS[b] for a, b in parts)
    return default


def annotation(pod: dict, name: str, default: str | None = None) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(PREFIX + name, default)


def _int_annotation(pod: dict, name: str, default: int) -> int:
    try:
        return int(annotation(pod, name, str(default)))
    except ValueError:
        return default


def exit_code_for_run(pod: dict, run: int) -> int:
    """Exit code of the run-th run (0-based) of the pod's containers."""
    code = _int_annotation(pod, "exit-code", 0)
    attempts = annotation(pod, "fail-attempts")
    if attempts is not None and run >= int(attempts):
        return 0
    return code


def pod_ip(pod: dict) -> str:
    digest = hashlib.sha256(pod["metadata"].get("uid", pod["metadata"]["name"]).encode()).digest()
    return f"10.244.{digest[0]}.{digest[1] % 250 + 2}"


def _container_id(pod: dict, container: str, run: int) -> str:
    seed = f"{pod['metadata'].get('uid', '')}/{container}/{run}".encode()
    return "containerd://" + hashlib.sha256(seed).hexdigest()


def _conditions(stamp: str, ready: bool, reason: str | None = None, scheduled_at: str = ""):
    status = "True" if ready else "False"
    conditions = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": stamp},
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
        {"type": "Ready", "status": status, "lastTransitionTime": stamp},
        {"type": "ContainersReady", "status": status, "lastTransitionTime": stamp},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at or stamp},
    ]
    if reason:
        conditions[2]["reason"] = conditions[3]["reason"] = reason
    for condition in conditions:
        condition.setdefault("lastProbeTime", None)
    return conditions


def _scheduled_at(pod: dict) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("lastTransitionTime", "")
    return ""


def _image_id(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()
    return f"{image.split(':')[0]}@sha256:{digest}"


def running_status(pod: dict, node: dict, now: datetime) -> dict:
    """Status of a pod the kubelet just started on `node`."""
    stamp = format_time(now)
    host_ip = next(
        (a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"),
        "10.0.0.2",
    )
    ip = pod_ip(pod)
    status = dict(pod.get("status") or {})
    status.update(
        {
            "phase": "Running",
            "conditions": _conditions(stamp, True, scheduled_at=_scheduled_at(pod)),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": stamp,
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": _image_id(c.get("image", "")),
                    "containerID": _container_id(pod, c["name"], 0),
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": stamp}},
                    "lastState": {},
                }
                for c in pod["spec"].get("containers") or []
            ],
        }
    )
    return status


def run_started_at(pod: dict) -> datetime | None:
    """When the current run of the pod's containers started."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        running = (container.get("state") or {}).get("running")
        if running and running.get("startedAt"):
            return parse_time(running["startedAt"])
    return None


def restarts(pod: dict) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((s.get("restartCount", 0) for s in statuses), default=0)


def _terminated(status: dict, exit_code: int, started: str, stamp: str, reason: str) -> dict:
    return {
        "exitCode": exit_code,
        "reason": reason,
        "startedAt": started,
        "finishedAt": stamp,
        "containerID": status.get("containerID", ""),
    }


def next_status(pod: dict, now: datetime, job_failed: int = 0) -> dict | None:
    """The status a Running pod moves to at `now`, or None while it keeps running.

    `job_failed` is the owning Job's failed count, so `fail-attempts` also counts
    attempts that were separate pods (restartPolicy Never)."""
    started = run_started_at(pod)
    if started is None or (pod.get("status") or {}).get("phase") != "Running":
        return None
    first_start = parse_time(pod["status"].get("startTime") or format_time(started))
    disrupt = annotation(pod, "disrupt-after")
    if disrupt is not None and now >= first_start + timedelta(seconds=parse_duration(disrupt)):
        return disrupted_status(pod, now, annotation(pod, "disruption-reason"))
    if now < started + timedelta(seconds=parse_duration(annotation(pod, "duration"))):
        return None
    run = restarts(pod) + job_failed
    exit_code = exit_code_for_run(pod, run)
    stamp = format_time(now)
    status = dict(pod["status"])
    policy = pod["spec"].get("restartPolicy", "Always")
    restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
    containers = []
    for container in status.get("containerStatuses") or []:
        started_at = container["state"]["running"]["startedAt"]
        reason = "Completed" if exit_code == 0 else "Error"
        terminated = _terminated(container, exit_code, started_at, stamp, reason)
        container = dict(container)
        if restart:
            count = container.get("restartCount", 0) + 1
            container.update(
                restartCount=count,
                lastState={"terminated": terminated},
                state={"running": {"startedAt": stamp}},
                containerID=_container_id(pod, container["name"], count),
            )
        else:
            container.update(ready=False, started=False, state={"terminated": terminated})
        containers.append(container)
    status["containerStatuses"] = containers
    if not restart:
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        reason = "PodCompleted" if exit_code == 0 else "PodFailed"
        status["conditions"] = _conditions(stamp, False, reason, scheduled_at=_scheduled_at(pod))
    return status


_DISRUPTION_MESSAGES = {
    "TerminationByKubelet": "Pod was terminated in response to imminent node shutdown.",
    "PreemptionByScheduler": "default-scheduler: preempting to accommodate a higher priority pod",
    "DeletionByTaintManager": "Taint manager: deleting due to NoExecute taint",
    "EvictionByEvictionAPI": "Eviction API: evicting",
    "DeletionByPodGC": "PodGC: node no longer exists",
}


def killed_status(pod: dict, now: datetime, exit_code: int = 137) -> dict:
    """Status of a pod whose containers were killed (SIGKILL at the end of a grace
    period by default): phase Failed, every running container terminated."""
    stamp = format_time(now)
    status = dict(pod.get("status") or {})
    containers = []
    for container in status.get("containerStatuses") or []:
        container = dict(container)
        running = (container.get("state") or {}).get("running")
        if running is not None or not (container.get("state") or {}).get("terminated"):
            started = (running or {}).get("startedAt", stamp)
            terminated = _terminated(container, exit_code, started, stamp, "Error")
            container.update(ready=False, started=False, state={"terminated": terminated})
        containers.append(container)
    status["containerStatuses"] = containers
    status["phase"] = "Failed"
    kept = [
        c
        for c in status.get("conditions") or []
        if c.get("type") not in ("Ready", "ContainersReady", "PodReadyToStartContainers")
        and c.get("type") not in ("Initialized", "PodScheduled")
    ]
    status["conditions"] = (
        _conditions(stamp, False, "PodFailed", scheduled_at=_scheduled_at(pod)) + kept
    )
    return status


def disrupted_status(pod: dict, now: datetime, reason: str | None = None) -> dict:
    """A pod killed from outside (spot reclaim, preemption): Failed with DisruptionTarget."""
    reason = reason or "TerminationByKubelet"
    status = killed_status(pod, now)
    status["reason"] = "Terminated" if reason == "TerminationByKubelet" else reason
    status["message"] = _DISRUPTION_MESSAGES.get(reason, "Pod was disrupted.")
    set_pod_condition(status, DISRUPTION_TARGET, reason, status["message"], format_time(now))
    return status


# --- GPU utilisation ---


def gpu_utilisation(pod: dict, now: datetime, device_key: str) -> float:
    """Graphics-engine activity 0..1 of a device held by `pod` at `now`."""
    profile = annotation(pod, "gpu-profile", "busy")
    explicit = annotation(pod, "gpu-util")
    level = float(explicit) / 100 if explicit is not None else {"idle": 0.0}.get(profile, 0.9)
    if profile == "idle" and explicit is None:
        return 0.0
    if profile == "bursty":
        # Busy for the first 20 s of every sim minute, idle the rest: averages ~1/3.
        return level if now.second < 20 else 0.02 * level
    return max(0.0, min(1.0, level + noise(device_key, now, 0.03)))


def framebuffer_used(pod: dict, memory_mib: int, utilisation: float) -> int:
    """MiB of framebuffer a pod's process holds: `kubesim.io/gpu-fb-used` when set,
    else the framework and model loaded (8 %) plus working memory with the load."""
    explicit = annotation(pod, "gpu-fb-used")
    if explicit is not None:
        try:
            return max(0, min(int(float(explicit)), memory_mib))
        except ValueError:
            pass
    return int(memory_mib * min(0.08 + 0.8 * utilisation, 0.98))


def noise(key: str, now: datetime, amplitude: float) -> float:
    """Deterministic jitter in [-amplitude, amplitude] per device and sim minute."""
    seed = f"{key}/{now.strftime('%Y%m%d%H%M')}".encode()
    fraction = int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") / 2**32
    return (fraction * 2 - 1) * amplitude


# --- logs ---


def start_log(pod: dict, started: datetime, container: str) -> str:
    """What a container prints when it starts."""
    lines = [f"{format_time(started)} kubesim: container {container} started"]
    extra = annotation(pod, "log")
    if extra:
        lines.extend(extra.splitlines())
    return "\n".join(lines) + "\n"


def end_log(pod: dict, started: datetime, ended: datetime, container: str, code: int) -> str:
    """A progress line per sim minute of the run, then the exit line."""
    total = parse_duration(annotation(pod, "duration"))
    lines = []
    elapsed = int((ended - started).total_seconds())
    for second in range(60, elapsed + 1, 60):
        done = min(100, int(100 * second / total)) if total else 100
        moment = format_time(started + timedelta(seconds=second))
        lines.append(f"{moment} step {second // 60}: {done}% done")
    lines.append(f"{format_time(ended)} kubesim: container {container} exited with code {code}")
    return "\n".join(lines) + "\n"
