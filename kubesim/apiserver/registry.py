"""The registry over kubesim's storage: what k8s.io/apiserver's generic registry
does, asking each kind's strategy (strategies.py) where kinds differ. A write is
defaulted, admitted, validated and prepared here (server-owned fields,
generation, the status subresource, field managers); a delete waits out its
strategy's grace period and the finalizers, propagates to dependents as the
garbage collector would, and empties a namespace. Reads and watches are the
storage's own.
"""

import random
import uuid
from collections import defaultdict
from datetime import timedelta

from kubesim.clock import Clock, format_time

from . import patch as patching
from .errors import AlreadyExists, BadRequest, Conflict, Forbidden, NotFound
from .patch import copy_json
from .resources import RESOURCES, ResourceType, builtin_cluster_role_bindings, builtin_cluster_roles
from .storage import Storage, resource_type
from .validation import validate

SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# What the apiserver puts on an object deleted with these propagation policies, for the
# garbage collector to remove once it has orphaned or deleted the dependents.
GC_FINALIZERS = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}
# Generated name suffixes use the apiserver's alphabet (no vowels, no look-alikes).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Store(Storage):
    """The storage with the registry's rules on every write: what the rest of kubesim
    (handlers, controllers, kubelet, exporters) reads and writes through."""

    def __init__(self, clock: Clock | None = None, *, history: int = 2000, seed: bool = True):
        super().__init__(history=history)
        # With a namespace controller (the control plane), a deleted namespace is
        # Terminating until it has emptied; without one it goes at once.
        self.namespace_lifecycle = False
        self.clock = clock or Clock()
        self._admission: dict[str, list] = defaultdict(list)
        self._early_admission: dict[str, list] = defaultdict(list)
        self._name_random = random.Random()
        if seed:
            self._seed()

    # --- wiring for the control plane ---

    def add_admission(self, resource: str, fn, *, before_validation=False) -> None:
        """fn(operation, obj, old, store) runs inside the lock before a create or update
        of `resource` is committed; it may mutate obj or raise an ApiError. With
        `before_validation` it runs first, as the checks of a registry's wrapping
        storage do (RBAC's escalation prevention refuses before roleRef is validated)."""
        (self._early_admission if before_validation else self._admission)[resource].append(fn)

    # --- writes ---

    def create(
        self,
        resource: str,
        namespace: str | None,
        obj: dict,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict:
        rtype = resource_type(resource)
        with self.lock:
            new = self._prepare_new(rtype, namespace, obj)
            owners = patching.update_owners(None, obj, field_manager) if field_manager else {}
            return self._write(rtype, None, new, owners=owners, dry_run=dry_run)

    def update(
        self,
        resource: str,
        namespace: str | None,
        obj: dict,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict:
        rtype = resource_type(resource)
        name = (obj.get("metadata") or {}).get("name", "")
        with self.lock:
            old = self.get_ref(resource, namespace, name)
            new = copy_json(obj)
            return self._replace(rtype, old, new, subresource, field_manager, dry_run)

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body,
        patch_type: str,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict:
        """patch_type: "merge", "strategic", "json" or "apply" (body: the parsed patch)."""
        rtype = resource_type(resource)
        if patch_type == "apply":
            return self.apply(
                resource,
                namespace,
                name,
                body,
                field_manager=field_manager or "",
                force=force,
                subresource=subresource,
                dry_run=dry_run,
            )
        with self.lock:
            old = self.get_ref(resource, namespace, name)
            if patch_type == "merge":
                new = patching.merge_patch(old, body)
            elif patch_type == "strategic":
                new = patching.strategic_merge(old, body)
            elif patch_type == "json":
                new = patching.json_patch(old, body)
            else:
                raise BadRequest(f"unknown patch type {patch_type}")
            if not isinstance(new, dict):
                raise BadRequest("patch did not produce an object")
            return self._replace(rtype, old, new, subresource, field_manager, dry_run)

    def apply(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        config: dict,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict:
        """Server-side apply: create when missing, else merge `config` into the live
        object with field ownership; identical content writes nothing."""
        rtype = resource_type(resource)
        if not field_manager:
            raise BadRequest("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        config = copy_json(config)
        config.setdefault("metadata", {}).setdefault("name", name)
        with self.lock:
            old = self._stored(rtype, namespace or config["metadata"].get("namespace"), name)
            merged, owners = patching.apply_config(old, config, field_manager, force=force)
            if old is None:
                new = self._prepare_new(rtype, namespace, merged)
                return self._write(rtype, None, new, owners=owners, dry_run=dry_run)
            merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self._replace(rtype, old, merged, subresource, None, dry_run, owners=owners)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
        dry_run: bool = False,
        preconditions: dict | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict:
        """Delete now, or mark for deletion: a scheduled, running pod gets a grace
        period (its kubelet finishes the deletion) and an object with finalizers stays
        until they are removed, as the apiserver's graceful delete does."""
        rtype = resource_type(resource)
        with self.lock:
            old = self.get_ref(resource, namespace, name)
            preconditions = preconditions or {}
            if preconditions.get("uid") not in (None, old["metadata"]["uid"]):
                raise Conflict(
                    message=f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                    f"UID in object meta: {old['metadata']['uid']}"
                )
            if preconditions.get("resourceVersion") not in (
                None,
                old["metadata"]["resourceVersion"],
            ):
                raise Conflict(resource=resource, group=rtype.group, name=name)
            if dry_run:
                grace = rtype.strategy.grace_period(old, grace_period_seconds)
                if grace or old["metadata"].get("finalizers"):
                    return _marked(old, self.clock.now(), grace)
                return self._deleted_answer(rtype, old, _policy(rtype, propagation_policy))
            return self._delete(rtype, old, propagation_policy, grace_period_seconds)

    def delete_collection(
        self,
        resource,
        namespace=None,
        *,
        label_selector=None,
        field_selector=None,
        propagation_policy=None,
        grace_period_seconds=None,
    ):
        rtype = resource_type(resource)
        with self.lock:
            objs, _ = self.list_refs(
                resource, namespace, label_selector=label_selector, field_selector=field_selector
            )
            return [self._delete(rtype, o, propagation_policy, grace_period_seconds) for o in objs]

    def evict(
        self,
        namespace: str,
        name: str,
        delete_options: dict | None = None,
        *,
        reason: str = "EvictionByEvictionAPI",
        message: str = "Eviction API: evicting",
    ) -> None:
        """POST pods/{name}/eviction: with no PodDisruptionBudget in the way, the pod
        gets the DisruptionTarget condition and is deleted with the eviction's options.
        (The taint eviction controller does the same with its own reason.)"""
        delete_options = delete_options or {}
        with self.lock:
            pod = self.get_ref("pods", namespace, name)
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                status = copy_json(pod.get("status") or {})
                set_pod_condition(
                    status, DISRUPTION_TARGET, reason, message, self.clock.timestamp()
                )
                self.update("pods", namespace, {**pod, "status": status}, subresource="status")
            self.delete(
                "pods",
                namespace,
                name,
                preconditions=delete_options.get("preconditions"),
                grace_period_seconds=delete_options.get("gracePeriodSeconds"),
            )

    def terminating_namespaces(self) -> "list[str]":
        with self.lock:
            return [
                ns["metadata"]["name"]
                for ns in self._objects_in(RESOURCES["namespaces"], None)
                if ns["metadata"].get("deletionTimestamp")
            ]

    def finish_namespace(self, name: str) -> bool:
        """The namespace controller's last step: once nothing is left in the
        Terminating namespace, remove its finalizer and so the namespace. True if gone."""
        with self.lock:
            for other in RESOURCES.values():
                if other.namespaced and self._objects_in(other, name):
                    return False
            obj = self._stored(RESOURCES["namespaces"], None, name)
            if obj is not None:
                self._commit(RESOURCES["namespaces"], None, obj, "DELETED")
            return True

    # --- internals ---

    def _seed(self) -> None:
        for name in SEED_NAMESPACES:
            self.create("namespaces", None, {"metadata": {"name": name}})
        for resource, objs in (
            ("clusterroles", builtin_cluster_roles()),
            ("clusterrolebindings", builtin_cluster_role_bindings()),
        ):
            rtype = RESOURCES[resource]
            for obj in objs:
                self._write(rtype, None, self._prepare_new(rtype, None, obj), owners={})

    def _prepare_new(self, rtype: ResourceType, namespace, obj: dict) -> dict:
        new = copy_json(obj)
        meta = new.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise BadRequest("resourceVersion should not be set on objects to be created")
        if rtype.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            owner = self._stored(RESOURCES["namespaces"], None, namespace)
            if owner is None:
                raise NotFound(resource="namespaces", name=namespace)
            if owner["metadata"].get("deletionTimestamp"):
                raise namespace_terminating(rtype, meta.get("name") or "", namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(self._name_random.choice(NAME_ALPHABET) for _ in range(5))
            meta["name"] = meta["generateName"] + suffix
        existing = meta.get("name") and self._stored(rtype, namespace, meta["name"])
        if existing:
            error = AlreadyExists(resource=rtype.plural, group=rtype.group, name=meta["name"])
            if existing["metadata"].get("deletionTimestamp"):
                error.message = f"object is being deleted: {error.message}"
            raise error
        # apiVersion and kind first, as the apiserver's encoder writes them.
        new = {"apiVersion": rtype.api_version, "kind": rtype.kind, **new}
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.clock.timestamp()
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(server_owned, None)
        if rtype.strategy.tracks_generation:
            meta["generation"] = 1
        return new

    def _replace(self, rtype, old, new, subresource, field_manager, dry_run, owners=None):
        meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        if meta.get("resourceVersion") and meta["resourceVersion"] != old_meta["resourceVersion"]:
            raise Conflict(resource=rtype.plural, group=rtype.group, name=old_meta["name"])
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        if subresource == "status":
            # The status subresource changes status only (labels etc. stay as they were).
            new = {**copy_json(old), "status": new.get("status", {})}
        elif "status" in rtype.subresources:
            # Where /status owns .status, a write of the main resource keeps it.
            new["status"] = copy_json(old.get("status", {}))
        meta = new["metadata"]
        for server_owned in (
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if server_owned in old_meta:
                meta[server_owned] = old_meta[server_owned]
            else:
                meta.pop(server_owned, None)
        meta["managedFields"] = old_meta.get("managedFields", [])
        if owners is None:
            owners = (
                patching.update_owners(old, new, field_manager)
                if field_manager and subresource != "status"
                else None
            )
        return self._write(rtype, old, new, owners=owners, dry_run=dry_run, subresource=subresource)

    def _write(self, rtype, old, new, *, owners, dry_run=False, subresource=None) -> dict:
        """Default, validate, admit and commit; a write that changes nothing is skipped."""
        strategy = rtype.strategy
        strategy.default(new)
        if subresource != "status":
            operation = "CREATE" if old is None else "UPDATE"
            for hook in self._early_admission.get(rtype.plural, ()):
                hook(operation, new, old, self)
            validate(rtype, new, old)
            for hook in self._admission.get(rtype.plural, ()):
                hook(operation, new, old, self)
            if old is None:
                strategy.prepare_for_create(new)
        meta = new["metadata"]
        if owners is not None:
            meta["managedFields"] = patching.render_managed_fields(
                (old or {}).get("metadata", {}).get("managedFields") or [],
                owners,
                rtype.api_version,
                self.clock.timestamp(),
            )
            if not meta["managedFields"]:
                del meta["managedFields"]
        if old is not None:
            if _same(old, new):
                return copy_json(old)
            if strategy.tracks_generation and _spec_changed(old, new):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
        if dry_run:
            return new
        self._commit(rtype, new, old, "ADDED" if old is None else "MODIFIED")
        if old is not None and _deletion_finished(new):
            self._commit(rtype, None, new, "DELETED")
        return copy_json(new)

    def _delete(self, rtype: ResourceType, obj: dict, policy: str | None, grace=None) -> dict:
        grace = rtype.strategy.grace_period(obj, grace)
        if grace or obj["metadata"].get("finalizers"):
            return self._mark_deleted(rtype, obj, grace)
        if rtype.strategy.holds_namespaced_objects:
            if self.namespace_lifecycle:
                return self._terminate_namespace(rtype, obj)
            namespace = obj["metadata"]["name"]
            for other in RESOURCES.values():
                if other.namespaced:
                    for child in self._objects_in(other, namespace):
                        if self._stored(other, namespace, child["metadata"]["name"]) is child:
                            self._commit(other, None, child, "DELETED")
        policy = _policy(rtype, policy)
        uid = obj["metadata"]["uid"]
        for dependent_type, dependent in self._dependents(obj):
            if policy == "Orphan":
                refs = [r for r in dependent["metadata"]["ownerReferences"] if r.get("uid") != uid]
                orphan = copy_json(dependent)
                orphan["metadata"]["ownerReferences"] = refs
                if not refs:
                    del orphan["metadata"]["ownerReferences"]
                self._commit(dependent_type, orphan, dependent, "MODIFIED")
            else:
                self._delete(dependent_type, dependent, policy)
        self._commit(rtype, None, obj, "DELETED")
        return self._deleted_answer(rtype, obj, policy)

    def _deleted_answer(self, rtype: ResourceType, obj: dict, policy: str) -> dict:
        """The object as the apiserver holds it when it answers the delete: as its
        strategy shows a deleted object, and with the garbage collector's finalizer
        after an Orphan or Foreground delete (kubesim does the collector's work at
        once, so that copy is never stored)."""
        deleted = copy_json(obj)
        meta = deleted["metadata"]
        rtype.strategy.as_deleted(deleted, self.clock.timestamp())
        finalizer = GC_FINALIZERS.get(policy) if rtype.strategy.garbage_collected else None
        if finalizer:
            meta["deletionTimestamp"] = self.clock.timestamp()
            meta["deletionGracePeriodSeconds"] = 0
            meta["finalizers"] = [*(meta.get("finalizers") or []), finalizer]
        return deleted

    def _terminate_namespace(self, rtype: ResourceType, obj: dict) -> dict:
        """Deleting a namespace makes it Terminating: no new content is admitted and the
        namespace controller empties it, then it goes (finish_namespace)."""
        if obj["metadata"].get("deletionTimestamp"):
            return copy_json(obj)
        marked = copy_json(obj)
        rtype.strategy.as_deleted(marked, self.clock.timestamp())
        self._commit(rtype, marked, obj, "MODIFIED")
        return copy_json(marked)

    def _mark_deleted(self, rtype: ResourceType, obj: dict, grace: int) -> dict:
        """Set deletionTimestamp (now + grace) instead of removing the object; a second
        delete may only shorten the grace period."""
        meta = obj["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and current is not None and current <= grace:
            return copy_json(obj)
        marked = _marked(obj, self.clock.now(), grace)
        self._commit(rtype, marked, obj, "MODIFIED")
        if _deletion_finished(marked):
            self._commit(rtype, None, marked, "DELETED")
        return copy_json(marked)

    def _dependents(self, owner: dict):
        uid = owner["metadata"]["uid"]
        namespace = owner["metadata"].get("namespace")
        for rtype in RESOURCES.values():
            for obj in self._objects_in(rtype, namespace or None):
                refs = obj["metadata"].get("ownerReferences") or ()
                if any(r.get("uid") == uid for r in refs):
                    yield rtype, obj


def namespace_terminating(rtype: ResourceType, name: str, namespace: str) -> Forbidden:
    """NamespaceLifecycle's refusal, word for word, with the cause clients look for."""
    error = Forbidden(
        resource=rtype.plural,
        group=rtype.group,
        name=name,
        message=f"unable to create new content in namespace {namespace} because it is being "
        "terminated",
    )
    error.details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return error


def _policy(rtype: ResourceType, policy: str | None) -> str:
    if policy is None:
        policy = rtype.strategy.default_propagation
    if policy not in ("Orphan", "Background", "Foreground"):
        raise BadRequest(f"unsupported propagationPolicy {policy!r}")
    return policy


def _marked(obj: dict, now, grace: int) -> dict:
    marked = copy_json(obj)
    marked["metadata"]["deletionTimestamp"] = format_time(now + timedelta(seconds=grace))
    marked["metadata"]["deletionGracePeriodSeconds"] = grace
    return marked


def _deletion_finished(obj: dict) -> bool:
    """A deleted object goes once its finalizers are gone (and, for a pod, once its
    kubelet confirmed with a zero grace period)."""
    meta = obj["metadata"]
    return bool(
        meta.get("deletionTimestamp")
        and not meta.get("finalizers")
        and not meta.get("deletionGracePeriodSeconds")
    )


DISRUPTION_TARGET = "DisruptionTarget"


def set_pod_condition(status: dict, kind: str, reason: str, message: str, stamp: str) -> None:
    """Add or replace a True pod condition."""
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    conditions.append(
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
    )
    status["conditions"] = conditions


def _same(old: dict, new: dict) -> bool:
    """Equal but for the resourceVersion (which a client may leave out)."""
    if old.keys() != new.keys():
        return False
    for key, value in new.items():
        if key == "metadata":
            other = old["metadata"]
            keys = (value.keys() | other.keys()) - {"resourceVersion"}
            if any(value.get(k) != other.get(k) for k in keys):
                return False
        elif old[key] != value:
            return False
    return True


def _spec_changed(old: dict, new: dict) -> bool:
    ignored = {"metadata", "status", "apiVersion", "kind"}
    keys = (old.keys() | new.keys()) - ignored
    return any(old.get(k) != new.get(k) for k in keys)
