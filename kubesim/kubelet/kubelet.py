"""The kubelet of every simulated node: takes the pods bound to it through
ContainerCreating, Running and their end (as `runtime` decides on the sim clock),
writes their logs, kills them when deleted, and reports the node's Ready condition."""

import copy
import logging

from kubesim.apiserver.errors import ApiError, BadRequest, NotFound
from kubesim.clock import parse_time
from kubesim.controllers import nodes as lifecycle
from kubesim.controllers import scheduler
from kubesim.controllers.base import Controller
from kubesim.kubelet import runtime

log = logging.getLogger(__name__)


class Kubelet(Controller):
    def sync(self, pods: list[dict]) -> None:
        now = self.clock.now()
        nodes = None
        for pod in pods:
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if not spec.get("nodeName"):
                continue
            if nodes is None:
                nodes = {n["metadata"]["name"]: n for n in self.store.list_refs("nodes")[0]}
            node = nodes.get(spec["nodeName"])
            if node is None or lifecycle.ready_status(node) != "True":
                continue  # no kubelet answers for this node
            phase = status.get("phase", "Pending")
            try:
                if pod["metadata"].get("deletionTimestamp"):
                    self._terminate_pod(pod, now)
                elif phase == "Pending" and not status.get("containerStatuses"):
                    on_node = [
                        p
                        for p in pods
                        if p["spec"].get("nodeName") == spec["nodeName"]
                        and p is not pod
                        and scheduler.is_active(p)
                    ]
                    self._create_containers(pod, node, now, on_node)
                elif phase == "Pending" and runtime.is_creating(pod):
                    self._start_containers(pod, node, now)
                elif phase == "Running":
                    self._advance_pod(pod, now)
            except ApiError as error:
                log.debug("kubelet on %s: %s", pod["metadata"]["name"], error)

    def _terminate_pod(self, pod: dict, now) -> None:
        """A deleted pod: its containers are killed when the grace period runs out, then
        the kubelet confirms the deletion (grace 0), as the real kubelet's status
        manager does once the containers are gone."""
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            if now < parse_time(meta["deletionTimestamp"]):
                return
            status = runtime.killed_status(pod, now)
            self._write_status("pods", {**pod, "status": status})
            started = runtime.run_started_at(pod)
            if started:
                self.log_each(pod, lambda name: runtime.end_log(pod, started, now, name, 137))
        if meta.get("deletionGracePeriodSeconds") != 0:
            self._ignore_missing(
                self.store.delete, "pods", meta["namespace"], meta["name"], grace_period_seconds=0
            )

    def _create_containers(self, pod: dict, node: dict, now, pods_on_node: list[dict]) -> None:
        """The kubelet takes the pod: Pending, containers waiting in ContainerCreating
        (the next pass starts them, as a kubelet reports each step)."""
        if not scheduler.held_device_keys(pod):
            # Pods created with spec.nodeName skip the scheduler: the device plugin
            # still hands them GPUs.
            devices = scheduler.assign_devices(pod, node, pods_on_node)
            if devices:
                pod = copy.deepcopy(pod)
                annotations = pod["metadata"].setdefault("annotations", {})
                annotations[scheduler.DEVICES_ANNOTATION] = ",".join(d.key for d in devices)
                pod = self.store.update("pods", pod["metadata"]["namespace"], pod)
        status = runtime.creating_status(pod, node, now)
        self._write_status("pods", {**pod, "status": status})
        for container in pod["spec"].get("containers") or []:
            self.event(
                pod,
                "Normal",
                "Pulled",
                f'Container image "{container.get("image")}" already present on machine',
                component="kubelet",
            )

    def _start_containers(self, pod: dict, node: dict, now) -> None:
        status = runtime.running_status(pod, node, now)
        self._write_status("pods", {**pod, "status": status})
        for container in pod["spec"].get("containers") or []:
            self.event(
                pod,
                "Normal",
                "Started",
                f"Started container {container['name']}",
                component="kubelet",
            )
        self.log_each(pod, lambda name: runtime.start_log(pod, now, name))

    def _advance_pod(self, pod: dict, now) -> None:
        status = runtime.next_status(pod, now, job_failed=self._job_failed(pod))
        if status is None:
            return
        first = (pod["spec"].get("containers") or [{}])[0].get("name", "")
        old = next(c for c in pod["status"].get("containerStatuses") or [] if c["name"] == first)
        new = next(c for c in status.get("containerStatuses") or [] if c["name"] == first)
        started = runtime.run_started_at(pod)
        self._write_status("pods", {**pod, "status": status})
        running = bool((new.get("state") or {}).get("running"))
        same_container = old.get("containerID") == new.get("containerID")
        if started and not (running and same_container):
            # The run ended: its exit line, in the log of the container that ran it.
            state = new.get("state") or {}
            terminated = state.get("terminated") or new["lastState"]["terminated"]
            code = terminated.get("exitCode", 0)
            self.log_each(pod, lambda name: runtime.end_log(pod, started, now, name, code))
        if running and not same_container:
            # A new container: a log of its own; the kubelet keeps the last one's, for
            # `previous=true`.
            for container in pod["spec"].get("containers") or []:
                self._log(pod, None, container["name"])
            self.log_each(pod, lambda name: runtime.start_log(pod, now, name))
        if runtime.in_back_off({"status": status}) and not runtime.in_back_off(pod):
            meta = pod["metadata"]
            self.event(
                pod,
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {first} in pod "
                f"{meta['name']}_{meta['namespace']}({meta['uid']})",
                component="kubelet",
            )
        if any(c.get("type") == "DisruptionTarget" for c in status.get("conditions") or []):
            self.event(pod, "Warning", "Killing", status.get("message", ""), component="kubelet")

    def _job_failed(self, pod: dict) -> int:
        """The owning Job's failed count, for `fail-attempts` across pods (read only when
        the annotation asks for it: it costs a store read)."""
        if runtime.annotation(pod, "fail-attempts") is None:
            return 0
        for ref in pod["metadata"].get("ownerReferences") or ():
            if ref.get("kind") == "Job":
                try:
                    job = self.store.get_ref("jobs", pod["metadata"]["namespace"], ref["name"])
                except NotFound:
                    return 0
                return (job.get("status") or {}).get("failed", 0)
        return 0

    def set_node_ready(self, name: str, status: str, reason=None, message=None) -> dict:
        """POST /_sim/nodes/{name}/condition: the kubelet reports (or stops reporting)."""
        if status not in lifecycle.READY_REASONS:
            raise BadRequest(
                f'status: Unsupported value: "{status}": supported values: '
                '"True", "False", "Unknown"'
            )
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            updated = lifecycle.with_ready(node, status, self.clock.timestamp(), reason, message)
            return self.store.update("nodes", None, updated, subresource="status")

    def disrupt_pod(self, namespace: str, name: str, reason: str = "TerminationByKubelet"):
        """Kill a running pod from outside (spot reclaim, preemption) right now."""
        pod = self.store.get("pods", namespace, name)
        status = runtime.disrupted_status(pod, self.clock.now(), reason)
        return self._write_status("pods", {**pod, "status": status})

    def log_each(self, pod: dict, text_for) -> None:
        """Append text_for(container name) to every container's log."""
        for container in (pod.get("spec") or {}).get("containers") or []:
            self._log(pod, text_for(container["name"]), container["name"])

    def _log(self, pod: dict, text: str | None, container: str = "") -> None:
        """Append to a container's log ("" or the first container's name: the first);
        None starts the log of a new container."""
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        if container == containers[0].get("name"):
            container = ""
        meta = pod["metadata"]
        if text is None:
            self.store.new_container_log(meta["namespace"], meta["name"], container)
        else:
            self.store.append_log(meta["namespace"], meta["name"], text, container)
