"""The resource quota controller: keeps each ResourceQuota's status.used current."""

from kubesim.apiserver.admission import quota_status
from kubesim.controllers.base import Controller


class QuotaController(Controller):
    def __init__(self, store, recorder):
        super().__init__(store, recorder)
        self._dirty_namespaces: set[str] = set()

    def on_change(self, event_type: str, resource: str, obj: dict) -> None:
        namespace = obj["metadata"].get("namespace")
        if resource in ("pods", "resourcequotas", "jobs") and namespace:
            self._dirty_namespaces.add(namespace)

    def sync(self) -> None:
        """Recompute status.used only for namespaces whose pods, jobs or quotas changed."""
        with self.store.lock:
            dirty, self._dirty_namespaces = self._dirty_namespaces, set()
        for namespace in dirty:
            quotas, _ = self.store.list_refs("resourcequotas", namespace)
            for resource_quota in quotas:
                status = quota_status(self.store, namespace, resource_quota)
                if status != resource_quota.get("status"):
                    updated = {**resource_quota, "status": status}
                    self._write_status("resourcequotas", updated)
