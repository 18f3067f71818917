"""The kubelet stand-in: pod status transitions and logs as pure functions of sim time.

A pod's behaviour is set by annotations (all optional):
  kubesim.io/duration         how long each run lasts ("300s", "5m", "1h", "90"); default 180s
  kubesim.io/exit-code        exit code of a run; default 0 (Succeeded)
  kubesim.io/fail-attempts    only the first N runs exit with exit-code, later runs exit 0
  kubesim.io/gpu-profile      busy | idle | bursty | constant | idle-after | daily (default busy)
  kubesim.io/gpu-util         utilisation percent 0-100, overrides the profile's level
  kubesim.io/gpu-idle-after   idle-after: busy this long after the pod started, then idle
  kubesim.io/gpu-busy-hours   daily: the busy window of each UTC day, "09:00-17:00"
  kubesim.io/gpu-fb-used      framebuffer the pod holds, MiB (default grows with the load)
  kubesim.io/disrupt-after    fail the pod this long after it started, with a
                              DisruptionTarget condition (spot reclaim / preemption)
  kubesim.io/disruption-reason  reason on that condition; default TerminationByKubelet
  kubesim.io/log              extra text the container prints at start
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from kubesim.apiserver.registry import DISRUPTION_TARGET, set_pod_condition
from kubesim.clock import format_time, parse_time

PREFIX = "kubesim.io/"
DEFAULT_DURATION = 180.0
# The kubelet's container restart back-off (CrashLoopBackOff), seconds.
INITIAL_BACK_OFF = 10.0
MAX_BACK_OFF = 300.0
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


def _conditions(
    stamp: str,
    ready: bool,
    reason: str | None = None,
    scheduled_at: str = "",
    message: str | None = None,
):
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
    if message:
        conditions[2]["message"] = conditions[3]["message"] = message
    for condition in conditions:
        condition.setdefault("lastProbeTime", None)
    return conditions


def _not_ready(pod: dict, stamp: str) -> list[dict]:
    """Conditions while containers are not ready (starting, or backing off): the
    kubelet's ContainersNotReady, naming them."""
    names = " ".join(c["name"] for c in pod["spec"].get("containers") or [])
    return _conditions(
        stamp,
        False,
        "ContainersNotReady",
        scheduled_at=_scheduled_at(pod),
        message=f"containers with unready status: [{names}]",
    )


def _scheduled_at(pod: dict) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("lastTransitionTime", "")
    return ""


def _image_id(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()
    return f"{image.split(':')[0]}@sha256:{digest}"


def creating_status(pod: dict, node: dict, now: datetime) -> dict:
    """Status of a pod the kubelet has just taken on `node`: still Pending, its
    containers waiting in ContainerCreating (the kubelet sets startTime now)."""
    stamp = format_time(now)
    host_ip = next(
        (a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"),
        "10.0.0.2",
    )
    ip = pod_ip(pod)
    status = dict(pod.get("status") or {})
    status.update(
        {
            "phase": "Pending",
            "conditions": _not_ready(pod, stamp),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": stamp,
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                    "lastState": {},
                }
                for c in pod["spec"].get("containers") or []
            ],
        }
    )
    return status


def is_creating(pod: dict) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(_waiting_reason(s) == "ContainerCreating" for s in statuses)


def _waiting_reason(container_status: dict) -> str | None:
    return ((container_status.get("state") or {}).get("waiting") or {}).get("reason")


def running_status(pod: dict, node: dict, now: datetime) -> dict:
    """Status of a pod whose containers the kubelet just started on `node`."""
    stamp = format_time(now)
    status = creating_status(pod, node, now) if not is_creating(pod) else dict(pod["status"])
    status.update(
        {
            "phase": "Running",
            "conditions": _conditions(stamp, True, scheduled_at=_scheduled_at(pod)),
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


def crash_back_off(restart_count: int) -> float:
    """Seconds the kubelet waits before starting a failed container again: 10 s after
    the first failure, doubling with each restart up to 5 minutes."""
    return min(MAX_BACK_OFF, INITIAL_BACK_OFF * 2 ** max(restart_count - 1, 0))


def in_back_off(pod: dict) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(_waiting_reason(s) == "CrashLoopBackOff" for s in statuses)


def next_status(pod: dict, now: datetime, job_failed: int = 0) -> dict | None:
    """The status a Running pod moves to at `now`, or None while it stays as it is.

    `job_failed` is the owning Job's failed count, so `fail-attempts` also counts
    attempts that were separate pods (restartPolicy Never)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return None
    started = run_started_at(pod)
    first_start = status.get("startTime") or (started and format_time(started))
    disrupt = annotation(pod, "disrupt-after")
    if (
        disrupt is not None
        and first_start
        and now >= parse_time(first_start) + timedelta(seconds=parse_duration(disrupt))
    ):
        return disrupted_status(pod, now, annotation(pod, "disruption-reason"))
    if in_back_off(pod):
        return _restarted_status(pod, now)
    if started is None:
        return None
    if now < started + timedelta(seconds=parse_duration(annotation(pod, "duration"))):
        return None
    run = restarts(pod) + job_failed
    exit_code = exit_code_for_run(pod, run)
    stamp = format_time(now)
    status = dict(status)
    policy = pod["spec"].get("restartPolicy", "Always")
    restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
    containers = []
    for container in status.get("containerStatuses") or []:
        started_at = container["state"]["running"]["startedAt"]
        reason = "Completed" if exit_code == 0 else "Error"
        terminated = _terminated(container, exit_code, started_at, stamp, reason)
        container = dict(container)
        count = container.get("restartCount", 0) + 1
        if restart and exit_code == 0:
            # Exited 0 under restartPolicy Always: started again at once (as the
            # KWOK stages of controlplane/ do; a real kubelet backs off here too).
            container.update(
                restartCount=count,
                lastState={"terminated": terminated},
                state={"running": {"startedAt": stamp}},
                containerID=_container_id(pod, container["name"], count),
            )
        elif restart:
            # A failed container waits in CrashLoopBackOff before its next run.
            meta = pod["metadata"]
            message = (
                f"back-off {int(crash_back_off(count))}s restarting failed "
                f"container={container['name']} "
                f"pod={meta['name']}_{meta.get('namespace', '')}({meta.get('uid', '')})"
            )
            container.update(
                restartCount=count,
                ready=False,
                started=False,
                lastState={"terminated": terminated},
                state={"waiting": {"reason": "CrashLoopBackOff", "message": message}},
            )
            container.pop("containerID", None)
        else:
            container.update(ready=False, started=False, state={"terminated": terminated})
        containers.append(container)
    status["containerStatuses"] = containers
    if restart and exit_code != 0:
        status["conditions"] = _not_ready(pod, stamp)
    elif not restart:
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        reason = "PodCompleted" if exit_code == 0 else "PodFailed"
        status["conditions"] = _conditions(stamp, False, reason, scheduled_at=_scheduled_at(pod))
    return status


def _restarted_status(pod: dict, now: datetime) -> dict | None:
    """The containers in CrashLoopBackOff run again once their back-off is over (from
    the end of the failed run), or None while they wait."""
    status = dict(pod["status"])
    containers = []
    for container in status.get("containerStatuses") or []:
        container = dict(container)
        if _waiting_reason(container) == "CrashLoopBackOff":
            failed = ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
            wait = timedelta(seconds=crash_back_off(container.get("restartCount", 1)))
            if failed and now < parse_time(failed) + wait:
                return None
            container.update(
                ready=True,
                started=True,
                state={"running": {"startedAt": format_time(now)}},
                containerID=_container_id(pod, container["name"], container["restartCount"]),
            )
        containers.append(container)
    status["containerStatuses"] = containers
    status["conditions"] = _conditions(format_time(now), True, scheduled_at=_scheduled_at(pod))
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

PROFILES = ("busy", "idle", "bursty", "constant", "idle-after", "daily")


@dataclass(frozen=True)
class GpuLoad:
    """How busy a pod keeps its GPUs, from its annotations (or a history workload):

    busy        level (default 0.9) with a small jitter per device and minute
    idle        0
    bursty      level for the first 20 s of every minute, 2 % of it after
    constant    exactly level
    idle-after  exactly level until `idle_after` seconds after the pod started, then 0
    daily       exactly level inside the daily UTC window `busy_hours`, else 0
    """

    profile: str = "busy"
    level: float | None = None  # 0..1; None: the profile's default
    idle_after: float = 0.0  # seconds
    busy_hours: tuple[int, int] = (9 * 60, 17 * 60)  # minutes of the UTC day, [start, end)
    fb_used_mib: int | None = None

    @classmethod
    def from_annotations(cls, pod: dict) -> GpuLoad:
        """Unparseable values fall back to defaults, as the old annotations did."""
        profile = annotation(pod, "gpu-profile", "busy")
        level = annotation(pod, "gpu-util")
        fields = {"profile": profile if profile in PROFILES else "busy"}
        with contextlib.suppress(ValueError):
            fields["level"] = max(0.0, min(1.0, float(level) / 100)) if level else None
        fields["idle_after"] = parse_duration(annotation(pod, "gpu-idle-after"), 0.0)
        with contextlib.suppress(ValueError):
            fields["busy_hours"] = parse_hours(annotation(pod, "gpu-busy-hours") or "09:00-17:00")
        with contextlib.suppress(ValueError, TypeError):
            fields["fb_used_mib"] = int(float(annotation(pod, "gpu-fb-used")))
        return cls(**fields)

    def utilisation(self, at: float, started: float, device_key: str) -> float:
        """Graphics-engine activity 0..1 at epoch second `at` of a pod started at `started`."""
        profile = self.profile
        level = 0.9 if self.level is None else self.level
        if profile == "idle":
            return 0.0 if self.level is None else _jitter(level, device_key, at)
        if profile == "constant":
            return level
        if profile == "idle-after":
            return level if at < started + self.idle_after else 0.0
        if profile == "daily":
            minute = int(at // 60) % 1440
            start, end = self.busy_hours
            inside = start <= minute < end if start <= end else (minute >= start or minute < end)
            return level if inside else 0.0
        if profile == "bursty":
            # Busy for the first 20 s of every minute, idle the rest: averages ~1/3.
            return level if at % 60 < 20 else 0.02 * level
        return _jitter(level, device_key, at)

    def framebuffer_used(self, memory_mib: int, utilisation: float) -> int:
        """MiB the pod's process holds: the set level, else the framework and model
        loaded (8 %) plus working memory growing with the load."""
        if self.fb_used_mib is not None:
            return max(0, min(self.fb_used_mib, memory_mib))
        return int(memory_mib * min(0.08 + 0.8 * utilisation, 0.98))


def parse_hours(text: str) -> tuple[int, int]:
    """ "09:00-17:00" -> (540, 1020): minutes of the day, the end excluded."""
    match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", text or "")
    if not match:
        raise ValueError(f"busy hours must look like 09:00-17:00, got {text!r}")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 24 or h2 > 24 or m1 > 59 or m2 > 59:
        raise ValueError(f"busy hours must look like 09:00-17:00, got {text!r}")
    return (h1 * 60 + m1) % 1440, (h2 * 60 + m2) % 1440 or 1440


def _jitter(level: float, device_key: str, at: float) -> float:
    return max(0.0, min(1.0, level + noise(device_key, at, 0.03)))


def _epoch(moment: datetime | float) -> float:
    return moment.timestamp() if isinstance(moment, datetime) else float(moment)


def _started(pod: dict, default: float) -> float:
    text = (pod.get("status") or {}).get("startTime")
    return parse_time(text).timestamp() if text else default


def gpu_utilisation(pod: dict, now: datetime | float, device_key: str) -> float:
    """Graphics-engine activity 0..1 of a device held by `pod` at `now`."""
    at = _epoch(now)
    return GpuLoad.from_annotations(pod).utilisation(at, _started(pod, at), device_key)


def framebuffer_used(pod: dict, memory_mib: int, utilisation: float) -> int:
    return GpuLoad.from_annotations(pod).framebuffer_used(memory_mib, utilisation)


def noise(key: str, now: datetime | float, amplitude: float) -> float:
    """Deterministic jitter in [-amplitude, amplitude] per key and sim minute."""
    minute = int(_epoch(now) // 60)
    fraction = zlib.crc32(f"{key}/{minute}".encode()) / 2**32
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
