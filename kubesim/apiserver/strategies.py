"""Each kind's strategy: what k8s.io/apiserver's generic registry asks a resource on
every write and delete (rest.RESTCreateStrategy, RESTUpdateStrategy,
RESTDeleteStrategy, RESTGracefulDeleteStrategy, GarbageCollectionDeleteStrategy;
the kinds' pkg/registry/<group>/<kind>/strategy.go). The registry runs the same
steps for every kind and asks `rtype.strategy` wherever kinds differ;
resources.py gives each kind served its strategy.
"""

from . import defaults, validation
from .errors import BadRequest, FieldError


class Strategy:
    """What a kind does unless its strategy says otherwise."""

    # metadata.generation is 1 at creation and counts the changes outside metadata
    # and status (PrepareForUpdate of the kinds whose controllers report
    # observedGeneration).
    tracks_generation = False
    # DefaultGarbageCollectionPolicy: what a delete without propagationPolicy does
    # to the object's dependents.
    default_propagation = "Background"
    # An Orphan or Foreground delete puts the garbage collector's finalizer on the
    # object (events' strategy does not take part in garbage collection).
    garbage_collected = True
    # Namespaced objects live inside objects of this kind, and go with them.
    holds_namespaced_objects = False

    def default(self, obj: dict) -> None:
        """The scheme's defaults (defaults.py), on every write."""

    def prepare_for_create(self, obj: dict) -> None:
        """A new object's last change, after validation and admission."""

    def name_errors(self, name: str) -> list[FieldError]:
        return validation.subdomain_name_errors(name)

    def validate(self, obj: dict) -> list[FieldError]:
        """The kind's rules beyond metadata, on a create and on every update."""
        return []

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        """What an update may not change."""
        return []

    def grace_period(self, obj: dict, requested) -> int:
        """CheckGracefulDelete: the seconds a delete waits (0: the object goes now)."""
        return 0

    def as_deleted(self, obj: dict, stamp: str) -> None:
        """Mark `obj` (a copy) as the answer to a delete that removed it at once shows it."""


class PodStrategy(Strategy):
    tracks_generation = True
    default = staticmethod(defaults.default_pod)

    def prepare_for_create(self, obj: dict) -> None:
        # The QoS class of the pod's final requests and limits: one whose requests came
        # from a LimitRange is Burstable or Guaranteed, not BestEffort.
        obj.setdefault("status", {})["qosClass"] = defaults.qos_class(obj.get("spec") or {})

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.pod_errors(obj)

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return validation.pod_update_errors(new, old)

    def grace_period(self, obj: dict, requested) -> int:
        """A pod that never ran on a node or has already ended goes at once."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is None:
            requested = spec.get("terminationGracePeriodSeconds", 30)
        try:
            period = int(requested)
        except (TypeError, ValueError):
            raise BadRequest(f"invalid gracePeriodSeconds: {requested!r}") from None
        return 1 if period < 0 else period

    def as_deleted(self, obj: dict, stamp: str) -> None:
        # Pods are always deleted gracefully, even with no grace period.
        obj["metadata"]["deletionTimestamp"] = stamp


class JobStrategy(Strategy):
    tracks_generation = True
    # batch/v1 Jobs orphan their pods by default, for backwards compatibility.
    default_propagation = "Orphan"
    default = staticmethod(defaults.default_job)

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.job_errors(obj)

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return validation.job_update_errors(new, old)


class WorkloadStrategy(Strategy):
    """Pods from a template, picked by a selector fixed at creation."""

    tracks_generation = True

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.workload_errors(obj)

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return validation.workload_update_errors(new, old)


class DeploymentStrategy(WorkloadStrategy):
    default = staticmethod(defaults.default_deployment)


class ReplicaSetStrategy(WorkloadStrategy):
    default = staticmethod(defaults.default_replica_set)


class StatefulSetStrategy(WorkloadStrategy):
    default = staticmethod(defaults.default_stateful_set)


class NamespaceStrategy(Strategy):
    holds_namespaced_objects = True
    default = staticmethod(defaults.default_namespace)

    def name_errors(self, name: str) -> list[FieldError]:
        return validation.label_name_errors(name)

    def as_deleted(self, obj: dict, stamp: str) -> None:
        obj["metadata"]["deletionTimestamp"] = stamp
        obj.setdefault("status", {})["phase"] = "Terminating"


class NodeStrategy(Strategy):
    default = staticmethod(defaults.default_node)


class EventStrategy(Strategy):
    garbage_collected = False
    default = staticmethod(defaults.default_event)

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.event_errors(obj)


class ResourceQuotaStrategy(Strategy):
    default = staticmethod(defaults.default_quota)

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.quota_errors(obj)


class LimitRangeStrategy(Strategy):
    default = staticmethod(defaults.default_limit_range)

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.limit_range_errors(obj)


class NetworkPolicyStrategy(Strategy):
    tracks_generation = True
    default = staticmethod(defaults.default_network_policy)


class RBACStrategy(Strategy):
    def name_errors(self, name: str) -> list[FieldError]:
        return validation.path_segment_name_errors(name)


class RoleStrategy(RBACStrategy):
    """Roles and ClusterRoles."""

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.role_errors(obj)


class RoleBindingStrategy(RBACStrategy):
    """RoleBindings and ClusterRoleBindings."""

    def validate(self, obj: dict) -> list[FieldError]:
        return validation.role_binding_errors(obj)

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return validation.role_binding_update_errors(new, old)
