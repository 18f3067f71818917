"""The node lifecycle controller (taints in step with Ready and cordon), the taint
eviction controller (NoExecute) and the pod garbage collector (pods of a node that is
gone)."""

import logging

from kubesim.apiserver.errors import ApiError
from kubesim.clock import format_time
from kubesim.controllers import nodes as lifecycle
from kubesim.controllers import scheduler
from kubesim.controllers.base import Controller
from kubesim.kubelet import runtime

log = logging.getLogger(__name__)


class NodeLifecycleController(Controller):
    def sync(self, pods: list[dict], now) -> None:
        nodes, _ = self.store.list_refs("nodes")
        stamp = format_time(now)
        by_name = {}
        for node in nodes:
            taints = lifecycle.desired_taints(node, stamp)
            if taints != ((node.get("spec") or {}).get("taints") or []):
                spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "taints"}
                if taints:
                    spec["taints"] = taints
                node = (
                    self._ignore_missing(self.store.update, "nodes", None, {**node, "spec": spec})
                    or node
                )
            by_name[node["metadata"]["name"]] = node
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name:
                continue
            try:
                if node_name not in by_name:
                    self._collect_orphan(pod, now)
                else:
                    self._evict_for_taints(pod, by_name[node_name], now)
            except ApiError as error:
                log.debug("node lifecycle of %s: %s", pod["metadata"]["name"], error)

    def _collect_orphan(self, pod: dict, now) -> None:
        """PodGC: a pod bound to a node that no longer exists fails with DisruptionTarget
        (DeletionByPodGC) and is deleted at once."""
        meta = pod["metadata"]
        terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if terminal and meta.get("deletionGracePeriodSeconds") == 0:
            return  # already deleted; waits for its finalizer
        if not terminal:
            status = runtime.disrupted_status(pod, now, "DeletionByPodGC")
            self._write_status("pods", {**pod, "status": status})
        self._ignore_missing(
            self.store.delete, "pods", meta["namespace"], meta["name"], grace_period_seconds=0
        )

    def _evict_for_taints(self, pod: dict, node: dict, now) -> None:
        """The taint eviction controller: NoExecute taints the pod does not tolerate (or
        tolerates only for tolerationSeconds) delete it, with DisruptionTarget reason
        DeletionByTaintManager."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or not scheduler.is_active(pod):
            return
        due = lifecycle.eviction_time(pod, (node.get("spec") or {}).get("taints") or [], now)
        if due is not None and now >= due:
            self.store.evict(
                meta["namespace"],
                meta["name"],
                reason="DeletionByTaintManager",
                message="Taint manager: deleting due to NoExecute taint",
            )
            self.event(
                pod,
                "Normal",
                "TaintManagerEviction",
                f"Marking for deletion Pod {meta['namespace']}/{meta['name']}",
                component="taint-eviction-controller",
            )
