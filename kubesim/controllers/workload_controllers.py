"""The apps/v1 controllers: Deployment -> ReplicaSet -> pods, StatefulSet -> pods,
carrying out what `workloads` decides."""

import logging
import random

from kubesim.apiserver.errors import ApiError
from kubesim.controllers import workloads
from kubesim.controllers.base import Controller, CreateBackoff

log = logging.getLogger(__name__)

MANAGER = "kube-controller-manager"  # the field manager of the controllers' own writes


class WorkloadControllers(Controller):
    def __init__(self, store, recorder):
        super().__init__(store, recorder)
        self._create_backoff = CreateBackoff()
        self._random = random.Random()

    def sync(self) -> None:
        for deployment in self.store.list_refs("deployments")[0]:
            self._each(self._sync_deployment, deployment)
        pods, _ = self.store.list_refs("pods")
        for rs in self.store.list_refs("replicasets")[0]:
            self._each(self._sync_replica_set, rs, pods)
        for sts in self.store.list_refs("statefulsets")[0]:
            self._each(self._sync_stateful_set, sts, pods)
        # The ReplicaSets' new statuses roll up into their Deployments'.
        for deployment in self.store.list_refs("deployments")[0]:
            self._each(self._deployment_status, deployment)

    def _each(self, sync, obj: dict, *args) -> None:
        if obj["metadata"].get("deletionTimestamp"):
            return
        try:
            sync(obj, *args)
        except ApiError as error:
            log.debug("%s sync of %s: %s", obj["kind"], obj["metadata"]["name"], error)

    def _owned_replica_sets(self, deployment: dict) -> list[dict]:
        namespace = deployment["metadata"]["namespace"]
        return [
            rs
            for rs in self.store.list_refs("replicasets", namespace)[0]
            if workloads.controlled_by(rs, deployment)
        ]

    def _sync_deployment(self, deployment: dict) -> None:
        namespace = deployment["metadata"]["namespace"]
        owned = self._owned_replica_sets(deployment)
        new = workloads.current_replica_set(deployment, owned)
        if new is None:
            revision = 1 + max(
                (int(_annotation(rs, workloads.REVISION) or 0) for rs in owned), default=0
            )
            collisions = (deployment.get("status") or {}).get("collisionCount", 0)
            hash_ = workloads.template_hash(deployment["spec"]["template"], collisions)
            wanted = workloads.new_replica_set(deployment, hash_, revision)
            new = self.store.create("replicasets", namespace, wanted, field_manager=MANAGER)
            if new["spec"]["replicas"]:
                self._scaled_event(deployment, new, 0)
        if _annotation(deployment, workloads.REVISION) != _annotation(new, workloads.REVISION):
            annotations = {**(deployment["metadata"].get("annotations") or {})}
            annotations[workloads.REVISION] = _annotation(new, workloads.REVISION)
            meta = {**deployment["metadata"], "annotations": annotations}
            updated = {**deployment, "metadata": meta}
            self.store.update("deployments", namespace, updated, field_manager=MANAGER)
        for rs in owned + ([new] if new not in owned else []):
            is_new = rs["metadata"]["uid"] == new["metadata"]["uid"]
            self._scale_replica_set(deployment, rs, deployment["spec"]["replicas"] if is_new else 0)

    def _scale_replica_set(self, deployment: dict, rs: dict, replicas: int) -> None:
        before = rs["spec"]["replicas"]
        annotations = {**(rs["metadata"].get("annotations") or {})}
        if replicas:
            revision = int(annotations.get(workloads.REVISION) or 1)
            annotations.update(workloads.replica_set_annotations(deployment, revision))
        if before == replicas and annotations == rs["metadata"].get("annotations"):
            return
        meta = {**rs["metadata"], "annotations": annotations}
        spec = {**rs["spec"], "replicas": replicas}
        namespace = rs["metadata"]["namespace"]
        replica_set = {**rs, "metadata": meta, "spec": spec}
        self.store.update("replicasets", namespace, replica_set, field_manager=MANAGER)
        if before != replicas:
            self._scaled_event(deployment, {**rs, "spec": spec}, before)

    def _scaled_event(self, deployment: dict, rs: dict, before: int) -> None:
        replicas = rs["spec"]["replicas"]
        way = "up" if replicas > before else "down"
        message = f"Scaled {way} replica set {rs['metadata']['name']} from {before} to {replicas}"
        self.event(deployment, "Normal", "ScalingReplicaSet", message, "deployment-controller")

    def _deployment_status(self, deployment: dict) -> None:
        owned = self._owned_replica_sets(deployment)
        new = workloads.current_replica_set(deployment, owned)
        status = workloads.deployment_status(deployment, owned, new, self.clock.timestamp())
        if status != (deployment.get("status") or {}):
            self._write_status("deployments", {**deployment, "status": status})

    def _sync_replica_set(self, rs: dict, pods: list[dict]) -> None:
        namespace = rs["metadata"]["namespace"]
        owned = workloads.owned_pods(rs, pods)
        create, delete = workloads.replica_set_diff(rs, owned)
        for _ in range(create):
            pod = workloads.replica_set_pod(rs, self._random)
            if self._create_owned_pod(rs, pod, "replicaset-controller"):
                owned.append(pod)
        for pod in delete:
            name = pod["metadata"]["name"]
            self._ignore_missing(self.store.delete, "pods", namespace, name)
            message = f"Deleted pod: {name}"
            self.event(rs, "Normal", "SuccessfulDelete", message, "replicaset-controller")
        owned = workloads.owned_pods(rs, self.store.list_refs("pods", namespace)[0])
        status = workloads.replica_set_status(rs, owned)
        if status != (rs.get("status") or {}):
            self._write_status("replicasets", {**rs, "status": status})

    def _sync_stateful_set(self, sts: dict, pods: list[dict]) -> None:
        namespace, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        owned = workloads.owned_pods(sts, pods)
        create, delete = workloads.stateful_set_step(sts, owned)
        for ordinal in create:
            pod = workloads.stateful_set_pod(sts, ordinal)
            message = f"create Pod {pod['metadata']['name']} in StatefulSet {name} successful"
            self._create_owned_pod(sts, pod, "statefulset-controller", message)
        for pod_name in delete:
            self._ignore_missing(self.store.delete, "pods", namespace, pod_name)
            message = f"delete Pod {pod_name} in StatefulSet {name} successful"
            self.event(sts, "Normal", "SuccessfulDelete", message, "statefulset-controller")
        owned = workloads.owned_pods(sts, self.store.list_refs("pods", namespace)[0])
        status = workloads.stateful_set_status(sts, owned)
        if status != (sts.get("status") or {}):
            self._write_status("statefulsets", {**sts, "status": status})

    def _create_owned_pod(self, owner: dict, pod: dict, component: str, message=None) -> bool:
        """Create a pod of a ReplicaSet or StatefulSet; a refusal (quota, a name clash)
        is a FailedCreate event and a back-off before the next try, as for Jobs."""
        uid = owner["metadata"]["uid"]
        if self._create_backoff.waiting(uid):
            return False
        try:
            self.store.create("pods", owner["metadata"]["namespace"], pod)
        except ApiError as error:
            message = f"Error creating: {error.message}"
            self.event(owner, "Warning", "FailedCreate", message, component)
            self._create_backoff.refused(uid)
            return False
        self._create_backoff.clear(uid)
        message = message or f"Created pod: {pod['metadata']['name']}"
        self.event(owner, "Normal", "SuccessfulCreate", message, component)
        return True


def _annotation(obj: dict, key: str) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(key)
