"""The default scheduler: binds pending pods to the node `scheduler.place` picks
(with the GPUs the device plugin hands out), or marks them Unschedulable."""

import copy
import logging
import time

from kubesim.apiserver.errors import ApiError
from kubesim.controllers import scheduler
from kubesim.controllers.base import Controller, frees_resources

log = logging.getLogger(__name__)

FULL_RESYNC = 2.0  # real seconds between full scheduler retries of pending pods


class DefaultScheduler(Controller):
    def __init__(self, store, recorder):
        super().__init__(store, recorder)
        self._schedule_all = True
        self._last_full_schedule = 0.0

    def on_change(self, event_type: str, resource: str, obj: dict) -> None:
        if resource == "nodes" or (resource == "pods" and frees_resources(event_type, obj)):
            self._schedule_all = True

    def sync(self, pods: list[dict]) -> None:
        pending = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and (p["spec"].get("schedulerName") or "default-scheduler") == "default-scheduler"
            and not p["metadata"].get("deletionTimestamp")
            and not p["spec"].get("schedulingGates")
        ]
        if not pending:
            return
        retry_all = self._schedule_all or time.monotonic() - self._last_full_schedule > FULL_RESYNC
        if retry_all:
            self._schedule_all = False
            self._last_full_schedule = time.monotonic()
        else:
            # Pods already judged unschedulable wait until something frees room.
            pending = [p for p in pending if not _unschedulable(p)]
            if not pending:
                return
        nodes, _ = self.store.list_refs("nodes")
        by_node: dict[str, list[dict]] = {}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and scheduler.is_active(pod):
                by_node.setdefault(node_name, []).append(pod)
        pending.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
        for pod in pending:
            node, devices, message = scheduler.place(pod, nodes, by_node)
            try:
                if node is None:
                    self._mark_unschedulable(pod, message)
                    continue
                bound = self._bind(pod, node, devices)
            except ApiError as error:
                log.debug("scheduling %s: %s", pod["metadata"]["name"], error)
                continue
            by_node.setdefault(node["metadata"]["name"], []).append(bound)

    def _bind(self, pod: dict, node: dict, devices: list) -> dict:
        node_name = node["metadata"]["name"]
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node_name
        if devices:
            annotations = bound["metadata"].setdefault("annotations", {})
            annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
        bound = self.store.update("pods", pod["metadata"]["namespace"], bound)
        stamp = self.clock.timestamp()
        status = dict(bound.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            }
        )
        status["conditions"] = conditions
        bound = self._write_status("pods", {**bound, "status": status}) or bound
        self.event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} "
            f"to {node_name}",
            component="default-scheduler",
        )
        return bound

    def _mark_unschedulable(self, pod: dict, message: str) -> None:
        status = dict(pod.get("status") or {})
        conditions = status.get("conditions") or []
        current = next((c for c in conditions if c["type"] == "PodScheduled"), None)
        if current and current.get("message") == message:
            return
        conditions = [c for c in conditions if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": self.clock.timestamp(),
            }
        )
        status["conditions"] = conditions
        self._write_status("pods", {**pod, "status": status})
        self.event(pod, "Warning", "FailedScheduling", message, component="default-scheduler")


def _unschedulable(pod: dict) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
