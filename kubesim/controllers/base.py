"""What every control loop shares: the store, its clock, the event recorder, status
writes that tolerate an object deleted meanwhile, and the back-off after a refused
pod create."""

import time

from kubesim.apiserver.errors import NotFound

CREATE_BACKOFF = (0.5, 10.0)  # real seconds: first and longest wait after a FailedCreate


class Controller:
    def __init__(self, store, recorder):
        self.store = store
        self.clock = store.clock
        self.event = recorder.event  # event(obj, type, reason, message, component=None)

    def _write_status(self, resource: str, obj: dict) -> dict | None:
        namespace = obj["metadata"].get("namespace")
        return self._ignore_missing(
            self.store.update, resource, namespace, obj, subresource="status"
        )

    @staticmethod
    def _ignore_missing(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotFound:
            return None


class CreateBackoff:
    """Per owner uid: after a refused pod create (quota, a name clash) wait before the
    next try, doubling from the first wait to the longest (real time)."""

    def __init__(self):
        self._until: dict[str, tuple[float, float]] = {}  # uid -> (until, wait)

    def waiting(self, uid: str) -> bool:
        until, _ = self._until.get(uid, (0.0, 0.0))
        return time.monotonic() < until

    def refused(self, uid: str) -> None:
        _, wait = self._until.get(uid, (0.0, 0.0))
        low, high = CREATE_BACKOFF
        wait = min(high, wait * 2) if wait else low
        self._until[uid] = (time.monotonic() + wait, wait)

    def clear(self, uid: str) -> None:
        self._until.pop(uid, None)


def frees_resources(event_type: str, pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return event_type == "DELETED" or phase in ("Succeeded", "Failed")
