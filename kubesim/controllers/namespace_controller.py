"""The namespace controller: empties a Terminating namespace, then lets it go."""

import contextlib

from kubesim.apiserver.errors import NotFound
from kubesim.apiserver.resources import RESOURCES
from kubesim.controllers.base import Controller


class NamespaceController(Controller):
    def sync(self) -> None:
        """The namespace controller: empty each Terminating namespace (pods get their
        grace period), then let it go."""
        for namespace in self.store.terminating_namespaces():
            for rtype in RESOURCES.values():
                if not rtype.namespaced:
                    continue
                for obj in self.store.list(rtype.plural, namespace):
                    if not obj["metadata"].get("deletionTimestamp"):
                        with contextlib.suppress(NotFound):
                            self.store.delete(
                                rtype.plural, namespace, obj["metadata"]["name"],
                                propagation_policy="Background",
                            )  # fmt: skip
            self.store.finish_namespace(namespace)
