"""Events, recorded as client-go's event recorder does for every component."""

import itertools
import logging
import time

from kubesim.apiserver.errors import ApiError, NotFound

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, store):
        self.store = store
        self.clock = store.clock
        self._events: dict[tuple, str] = {}  # (uid, type, reason, message) -> event name
        self._event_ids = itertools.count(1)

    def event(self, obj: dict, kind: str, reason: str, message: str, component=None) -> None:
        """Record an Event on `obj`; a repeat of the same event bumps its count, as
        client-go's event correlator does. Repeated warnings (FailedCreate names a new
        pod each time) fold into one event carrying the latest message, so a Job
        blocked by quota for hours keeps one event, not thousands."""
        meta = obj["metadata"]
        component = component or "job-controller"
        key = (meta["uid"], kind, reason, message if kind == "Normal" else "")
        stamp = self.clock.timestamp()
        namespace = meta.get("namespace") or "default"
        try:
            name = self._events.get(key)
            if name:
                try:
                    existing = self.store.get("events", namespace, name)
                    existing["count"] = existing.get("count", 1) + 1
                    existing["lastTimestamp"] = stamp
                    existing["message"] = message
                    self.store.update("events", namespace, existing)
                    return
                except NotFound:
                    pass
            name = f"{meta['name']}.{int(time.time() * 1e6):x}{next(self._event_ids):04x}"
            self._events[key] = name
            self.store.create(
                "events",
                namespace,
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": {
                        "apiVersion": obj.get("apiVersion", "v1"),
                        "kind": obj.get("kind", ""),
                        "name": meta["name"],
                        "namespace": namespace,
                        "uid": meta["uid"],
                        "resourceVersion": meta.get("resourceVersion", ""),
                    },
                    "reason": reason,
                    "message": message,
                    "type": kind,
                    "count": 1,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "source": {"component": component},
                    "reportingComponent": component,
                    "reportingInstance": "",
                },
            )
        except ApiError as error:  # e.g. the namespace is being deleted
            log.debug("event %s on %s: %s", reason, meta["name"], error)
