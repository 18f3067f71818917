"""The storage under kubesim's registry: what etcd and the apiserver's storage layer
(k8s.io/apiserver/pkg/storage) do. Objects by key, one resourceVersion counter, the
watch history with its compaction, and the watchers each committed change is fanned
out to. It keeps what it is given: the rules of a write live in the registry above.

Committed objects are never mutated in place: every write builds a new dict and
swaps it in. That lets the HTTP layer serialize a stored object outside the lock
without copying it (see `get_ref`/`list_refs`), which is the hot path.
"""

import queue
import threading
from collections import deque

from .errors import BadRequest, Expired, NotFound
from .patch import copy_json
from .resources import RESOURCES, ResourceType
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector


def resource_type(resource: str) -> ResourceType:
    try:
        return RESOURCES[resource]
    except KeyError:
        raise NotFound(
            message=f"the server could not find the requested resource ({resource})"
        ) from None


class Watcher:
    """One open watch; the storage feeds it (event_type, obj, old) tuples."""

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


class Storage:
    """The keyspace of every kind, with the container logs of its pods beside it."""

    def __init__(self, *, history: int = 2000):
        self.lock = threading.RLock()
        self._objects: dict[str, dict[tuple, dict]] = {plural: {} for plural in RESOURCES}
        self._rv = 0
        self._subscribers: list = []
        self._history: deque = deque(maxlen=history)
        self._compacted_rv = 0
        self._watchers: set[Watcher] = set()
        self.logs: dict[tuple, str] = {}
        self.previous_logs: dict[tuple, str] = {}  # of the container before the current one

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
            obj = self._stored(rtype, namespace, name)
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

    def _stored(self, rtype: ResourceType, namespace, name) -> dict | None:
        """The committed object under that key, or None."""
        return self._objects[rtype.plural].get(self._key(rtype, namespace, name))

    def _objects_in(self, rtype: ResourceType, namespace: str | None) -> "list[dict]":
        """The committed objects of one kind in `namespace` (None: all of them), in
        the order they were first stored; a list, so the caller may commit meanwhile."""
        objects = self._objects[rtype.plural]
        if namespace is None:
            return list(objects.values())
        return [o for k, o in objects.items() if k[0] == namespace]

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
            # The container logs of a kind with a log subresource (pods) go with the
            # object (the kubelet removes its containers).
            if "log" in rtype.subresources:
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
