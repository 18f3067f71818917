"""The in-memory object store: what etcd plus the generic registry do in a real apiserver.

Committed objects are never mutated in place: every write builds a new dict and
swaps it in. That lets the HTTP layer serialize a stored object outside the lock
without copying it (see `get_ref`/`list_refs`), which is the hot path.
"""

import queue
import random
import threading
import uuid
from collections import defaultdict, deque
from datetime import timedelta

from kubesim.clock import Clock, format_time

from . import patch as patching
from .errors import AlreadyExists, BadRequest, Conflict, Expired, Forbidden, NotFound
from .resources import (
    RESOURCES,
    ResourceType,
    apply_defaults,
    builtin_cluster_role_bindings,
    builtin_cluster_roles,
    prepare_for_create,
)
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .validation import validate

copy_json = patching.copy_json

SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Kinds whose spec changes bump metadata.generation.
GENERATION_KINDS = {"jobs", "pods", "networkpolicies", "deployments", "replicasets", "statefulsets"}
# Kinds whose /status subresource owns .status: a PUT of the main resource keeps it.
STATUS_SUBRESOURCE = {r.plural for r in RESOURCES.values() if "status" in r.subresources}
# Generated name suffixes use the apiserver's alphabet (no vowels, no look-alikes).
# What the apiserver puts on an object deleted with these propagation policies, for the
# garbage collector to remove once it has orphaned or deleted the dependents.
GC_FINALIZERS = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def resource_type(resource: str) -> ResourceType:
    try:
        return RESOURCES[resource]
    except KeyError:
        raise NotFound(
            message=f"the server could not find the requested resource ({resource})"
        ) from None


class Watcher:
    """One open watch; the store feeds it (event_type, obj, old) tuples."""

    def __init__(self, rtype, namespace, label_selector, field_selector):
        self.rtype = rtype
        self.namespace = namespace
        self.labels = parse_label_selector(label_selector)
        self.fields = parse_field_selector(rtype.plural, field_selector)
        self.queue: queue.Queue = queue.Queue()

    def matches(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return labels_match(self.labels, meta.get("labels")) and fields_match(self.fields, obj)

    def translate(self, event_type: str, obj: dict, old: dict | None):
        """The event this watcher sees, given its selectors (None: nothing).

        An object that stops matching is DELETED for this watcher, one that starts
        matching is ADDED: what the apiserver's watch cache does."""
        now, before = self.matches(obj), self.matches(old)
        if event_type == "DELETED":
            return ("DELETED", obj) if now else None
        if now and before:
            return ("MODIFIED", obj)
        if now:
            return ("ADDED", obj)
        if before:
            return ("DELETED", obj)
        return None


class Store:
    def __init__(self, clock: Clock | None = None, *, history: int = 2000, seed: bool = True):
        self.lock = threading.RLock()
        # With a namespace controller (the control plane), a deleted namespace is
        # Terminating until it has emptied; without one it goes at once.
        self.namespace_lifecycle = False
        self.clock = clock or Clock()
        self._objects: dict[str, dict[tuple, dict]] = {plural: {} for plural in RESOURCES}
        self._rv = 0
        self._admission: dict[str, list] = defaultdict(list)
        self._early_admission: dict[str, list] = defaultdict(list)
        self._subscribers: list = []
        self._history: deque = deque(maxlen=history)
        self._compacted_rv = 0
        self._watchers: set[Watcher] = set()
        self.logs: dict[tuple, str] = {}
        self.previous_logs: dict[tuple, str] = {}  # of the container before the current one
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

    def subscribe(self, fn) -> None:
        """fn(event_type, resource, obj) after every committed change, inside the lock
        (keep it quick: set an Event, don't do the work there)."""
        self._subscribers.append(fn)

    def append_log(self, namespace: str, name: str, text: str, container: str = "") -> None:
        """Container output served by GET pods/{name}/log ("" is the first container)."""
        key = (namespace, name, container)
        with self.lock:
            self.logs[key] = self.logs.get(key, "") + text

    def new_container_log(self, namespace: str, name: str, container: str = "") -> None:
        """The container was started again: its log starts empty and the last one's is
        kept as the previous (a kubelet keeps one dead container per container)."""
        key = (namespace, name, container)
        with self.lock:
            if key in self.logs:
                self.previous_logs[key] = self.logs[key]
            self.logs[key] = ""

    def read_log(
        self, namespace: str, name: str, container: str = "", *, previous: bool = False
    ) -> str | None:
        """A container's output so far, or its previous container's (None: none)."""
        with self.lock:
            return (self.previous_logs if previous else self.logs).get((namespace, name, container))

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    # --- reads ---

    def get(self, resource: str, namespace: str | None, name: str) -> dict:
        return copy_json(self.get_ref(resource, namespace, name))

    def get_ref(self, resource: str, namespace: str | None, name: str) -> dict:
        """The committed object itself: read it, never change it."""
        rtype = resource_type(resource)
        with self.lock:
            obj = self._objects[resource].get(self._key(rtype, namespace, name))
        if obj is None:
            raise NotFound(resource=resource, group=rtype.group, name=name)
        return obj

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict]:
        return [
            copy_json(o)
            for o in self.list_refs(
                resource, namespace, label_selector=label_selector, field_selector=field_selector
            )[0]
        ]

    def list_refs(
        self, resource, namespace=None, *, label_selector=None, field_selector=None, at_rv=None
    ):
        """(committed objects, resourceVersion of the list), sorted like etcd keys
        (`namespace/name`). With `at_rv`, the objects as they were at that
        resourceVersion, rebuilt from the watch history: (None, rv) when the history no
        longer reaches back that far."""
        rtype = resource_type(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(resource, field_selector)
        with self.lock:
            if at_rv is None or at_rv >= self._rv:
                items, rv = self._objects[resource], str(self._rv)
            elif at_rv < self._compacted_rv:
                return None, str(self._rv)
            else:
                items, rv = self._objects_at(rtype, at_rv), str(at_rv)
            if namespace and rtype.namespaced:
                selected = [o for k, o in items.items() if k[0] == namespace]
            else:
                selected = list(items.values())
        if labels:
            selected = [o for o in selected if labels_match(labels, o["metadata"].get("labels"))]
        if fields:
            selected = [o for o in selected if fields_match(fields, o)]
        selected.sort(key=_etcd_key)
        return selected, rv

    def _objects_at(self, rtype: ResourceType, rv: int) -> dict:
        """The objects of one kind at resourceVersion `rv`: today's, with every later
        change of that kind undone (newest first)."""
        objects = dict(self._objects[rtype.plural])
        for entry_rv, event_type, resource, obj, old in reversed(self._history):
            if entry_rv <= rv:
                break
            if resource != rtype.plural:
                continue
            key = self._key(rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            if event_type == "ADDED":
                objects.pop(key, None)
            else:
                objects[key] = old
        return objects

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
            key = self._key(rtype, namespace or config["metadata"].get("namespace"), name)
            old = self._objects[resource].get(key)
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
                grace = _grace_period(rtype, old, grace_period_seconds)
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

    # --- watch ---

    def watch(
        self,
        resource,
        namespace=None,
        *,
        resource_version=None,
        label_selector=None,
        field_selector=None,
        send_initial_events: bool | None = None,
    ) -> tuple[Watcher, list]:
        """Register a watcher; returns it with the events it must send first.

        Without `send_initial_events` the legacy rules hold: no resourceVersion (or
        "0") starts with the current state as ADDED events, a resourceVersion replays
        the changes after it. `send_initial_events=True` always starts with the
        current state, `False` starts now (or after the given resourceVersion).
        `watcher.initial_rv` is the resourceVersion the initial events describe."""
        rtype = resource_type(resource)
        watcher = Watcher(rtype, namespace, label_selector, field_selector)
        with self.lock:
            watcher.initial_rv = self.resource_version
            if send_initial_events is None:
                send_initial_events = resource_version in (None, "", "0")
            if resource_version not in (None, "", "0"):
                since = parse_resource_version(resource_version)
                if since < self._compacted_rv and not send_initial_events:
                    raise Expired(f"too old resource version: {since} ({self._compacted_rv + 1})")
            if send_initial_events:
                objs, _ = self.list_refs(
                    resource,
                    namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                )
                initial = [("ADDED", o) for o in objs]
            elif resource_version in (None, "", "0"):
                initial = []
            else:
                initial = []
                for rv, event_type, res, obj, old in self._history:
                    if rv > since and res == resource:
                        event = watcher.translate(event_type, obj, old)
                        if event:
                            initial.append(event)
            self._watchers.add(watcher)
        return watcher, initial

    def bookmark(self, watcher: Watcher) -> None:
        """Queue a BOOKMARK at the current resourceVersion behind the events already
        queued for `watcher` (under the lock, so no event can overtake it)."""
        with self.lock:
            watcher.queue.put(("BOOKMARK", self.resource_version))

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers.discard(watcher)

    def compact(self) -> None:
        """Forget all watch history (tests use it to provoke 410 Gone)."""
        with self.lock:
            self._history.clear()
            self._compacted_rv = self._rv

    # --- persistence ---

    def dump(self) -> dict:
        with self.lock:
            return {
                "resourceVersion": self._rv,
                "objects": {r: list(objs.values()) for r, objs in self._objects.items() if objs},
                "logs": [[ns, name, text, c] for (ns, name, c), text in self.logs.items()],
                "previousLogs": [
                    [ns, name, text, c] for (ns, name, c), text in self.previous_logs.items()
                ],
            }

    def load(self, state: dict) -> None:
        with self.lock:
            self._objects = {plural: {} for plural in RESOURCES}
            for resource, objs in state.get("objects", {}).items():
                rtype = resource_type(resource)
                for obj in objs:
                    meta = obj["metadata"]
                    self._objects[resource][
                        self._key(rtype, meta.get("namespace"), meta["name"])
                    ] = obj
            self._rv = int(state.get("resourceVersion", 0))
            self._history.clear()
            self._compacted_rv = self._rv
            self.logs, self.previous_logs = (
                {
                    (entry[0], entry[1], entry[3] if len(entry) > 3 else ""): entry[2]
                    for entry in state.get(field, [])
                }
                for field in ("logs", "previousLogs")
            )

    # --- internals ---

    def _key(self, rtype: ResourceType, namespace, name) -> tuple:
        return (namespace or "" if rtype.namespaced else "", name)

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
            owner = self._objects["namespaces"].get(("", namespace))
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
        existing = meta.get("name") and self._objects[rtype.plural].get(
            self._key(rtype, namespace, meta["name"])
        )
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
        if rtype.plural in GENERATION_KINDS:
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
        elif rtype.plural in STATUS_SUBRESOURCE:
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
        apply_defaults(rtype.plural, new)
        if subresource != "status":
            operation = "CREATE" if old is None else "UPDATE"
            for hook in self._early_admission.get(rtype.plural, ()):
                hook(operation, new, old, self)
            validate(rtype, new, old)
            for hook in self._admission.get(rtype.plural, ()):
                hook(operation, new, old, self)
            if old is None:
                prepare_for_create(rtype.plural, new)
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
            if rtype.plural in GENERATION_KINDS and _spec_changed(old, new):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
        if dry_run:
            return new
        self._commit(rtype, new, old, "ADDED" if old is None else "MODIFIED")
        if old is not None and _deletion_finished(new):
            self._commit(rtype, None, new, "DELETED")
        return copy_json(new)

    def _commit(
        self, rtype: ResourceType, obj: dict | None, old: dict | None, event_type: str
    ) -> None:
        self._rv += 1
        target = obj if obj is not None else old
        meta = target["metadata"]
        key = self._key(rtype, meta.get("namespace"), meta["name"])
        if event_type == "DELETED":
            # The DELETED event carries the last state with a fresh resourceVersion.
            target = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self._rv)}}
            self._objects[rtype.plural].pop(key, None)
            if rtype.plural == "pods":
                for logs in (self.logs, self.previous_logs):
                    for log_key in [k for k in logs if k[:2] == key]:
                        del logs[log_key]
        else:
            meta["resourceVersion"] = str(self._rv)
            self._objects[rtype.plural][key] = target
        if len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0][0]
        self._history.append((self._rv, event_type, rtype.plural, target, old))
        for watcher in self._watchers:
            if watcher.rtype is rtype:
                event = watcher.translate(event_type, target, old)
                if event:
                    watcher.queue.put(event)
        for subscriber in self._subscribers:
            subscriber(event_type, rtype.plural, target)

    def _delete(self, rtype: ResourceType, obj: dict, policy: str | None, grace=None) -> dict:
        grace = _grace_period(rtype, obj, grace)
        if grace or obj["metadata"].get("finalizers"):
            return self._mark_deleted(rtype, obj, grace)
        if rtype.plural == "namespaces" and self.namespace_lifecycle:
            return self._terminate_namespace(obj)
        if rtype.plural == "namespaces":
            namespace = obj["metadata"]["name"]
            for other in RESOURCES.values():
                if other.namespaced:
                    for child in [
                        o for k, o in self._objects[other.plural].items() if k[0] == namespace
                    ]:
                        if (
                            self._objects[other.plural].get(
                                self._key(other, namespace, child["metadata"]["name"])
                            )
                            is child
                        ):
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
        """The object as the apiserver holds it when it answers the delete: pods are
        deleted gracefully even with no grace (deletionTimestamp set), and an Orphan or
        Foreground delete puts the garbage collector's finalizer on the object (kubesim
        does the collector's work at once, so that copy is never stored)."""
        deleted = copy_json(obj)
        meta = deleted["metadata"]
        if rtype.plural in ("pods", "namespaces"):
            meta["deletionTimestamp"] = self.clock.timestamp()
        if rtype.plural == "namespaces":
            deleted.setdefault("status", {})["phase"] = "Terminating"
        finalizer = GC_FINALIZERS.get(policy) if rtype.garbage_collected else None
        if finalizer:
            meta["deletionTimestamp"] = self.clock.timestamp()
            meta["deletionGracePeriodSeconds"] = 0
            meta["finalizers"] = [*(meta.get("finalizers") or []), finalizer]
        return deleted

    def _terminate_namespace(self, obj: dict) -> dict:
        """Deleting a namespace makes it Terminating: no new content is admitted and the
        namespace controller empties it, then it goes (finish_namespace)."""
        if obj["metadata"].get("deletionTimestamp"):
            return copy_json(obj)
        marked = copy_json(obj)
        marked["metadata"]["deletionTimestamp"] = self.clock.timestamp()
        marked.setdefault("status", {})["phase"] = "Terminating"
        self._commit(RESOURCES["namespaces"], marked, obj, "MODIFIED")
        return copy_json(marked)

    def terminating_namespaces(self) -> "list[str]":
        with self.lock:
            return [
                key[1]
                for key, ns in self._objects["namespaces"].items()
                if ns["metadata"].get("deletionTimestamp")
            ]

    def finish_namespace(self, name: str) -> bool:
        """The namespace controller's last step: once nothing is left in the
        Terminating namespace, remove its finalizer and so the namespace. True if gone."""
        with self.lock:
            for other in RESOURCES.values():
                if other.namespaced and any(k[0] == name for k in self._objects[other.plural]):
                    return False
            obj = self._objects["namespaces"].get(("", name))
            if obj is not None:
                self._commit(RESOURCES["namespaces"], None, obj, "DELETED")
            return True

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
            for key, obj in list(self._objects[rtype.plural].items()):
                if namespace and key[0] != namespace:
                    continue
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


def _etcd_key(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def parse_resource_version(value: str) -> int:
    """A resourceVersion from a query: "" and "0" are 0, anything else an unsigned
    integer, else a 400 with the apiserver's text (which still answers 500 for it:
    kubernetes/kubernetes#139485)."""
    if value in (None, "", "0"):
        return 0
    if not value.isascii() or not value.isdigit():
        raise BadRequest(
            f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing '
            f'"{value}": invalid syntax'
        )
    if int(value) >= 2**64:
        raise BadRequest(
            f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing '
            f'"{value}": value out of range'
        )
    return int(value)


def _grace_period(rtype: ResourceType, obj: dict, requested) -> int:
    """Seconds a delete waits: only pods have one (the apiserver's CheckGracefulDelete);
    a pod that never ran on a node or has already ended goes at once."""
    if rtype.plural != "pods":
        return 0
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


def _policy(rtype: ResourceType, policy: str | None) -> str:
    if policy is None:
        # batch/v1 Jobs orphan their pods by default, for backwards compatibility.
        policy = "Orphan" if rtype.plural == "jobs" else "Background"
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
