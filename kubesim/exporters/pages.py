"""The exporters' pages over the live store: the DCGM exporter of every GPU node,
kube-state-metrics, and the DCGM targets for Prometheus' service discovery."""

import contextlib
import json
import os

from kubesim.apiserver.errors import NotFound
from kubesim.exporters import dcgm, ksm
from kubesim.exposition import TEXT_CONTENT_TYPE


class Exporters:
    def __init__(self, store):
        self.store = store
        self.clock = store.clock
        self.energy = dcgm.EnergyMeter()
        # --metric-labels-allowlist of the simulated kube-state-metrics.
        self.ksm_allowlist = ksm.DEFAULT_ALLOWLIST
        self._file_sd: tuple[str, str] | None = None  # (path, address) to keep current
        self._file_sd_dirty = False

    def on_change(self, event_type: str, resource: str, obj: dict) -> None:
        if resource == "nodes" and self._file_sd:
            self._file_sd_dirty = True

    def sync(self) -> None:
        """Rewrite the targets file when nodes came or went."""
        if self._file_sd_dirty:
            self._file_sd_dirty = False
            self._write_file_sd()

    def metrics(self) -> str:
        """DCGM exporter text of every GPU node, for GET /metrics."""
        nodes, _ = self.store.list_refs("nodes")
        pods, _ = self.store.list_refs("pods")
        return dcgm.render(nodes, pods, self.clock.now(), meter=self.energy)

    def metrics_page(self, path: str, address: str) -> tuple[str, str] | None:
        """GET /metrics/<path>: `kube-state-metrics`, `dcgm/{node}` (the exporter pod of
        one node) or `dcgm-targets.json`; None for anything else (404)."""
        if path == "kube-state-metrics":
            objects = {
                resource: self.store.list_refs(resource)[0] for resource in ksm.ROWS_BY_RESOURCE
            }
            return ksm.render_objects(objects, self.ksm_allowlist), TEXT_CONTENT_TYPE
        if path == "dcgm-targets.json":
            return json.dumps(self.dcgm_targets(address), indent=2), "application/json"
        if path.startswith("dcgm/"):
            try:
                node = self.store.get_ref("nodes", None, path[len("dcgm/") :])
            except NotFound:
                return None
            if not dcgm.is_exporter_node(node):
                return None
            pods, _ = self.store.list_refs("pods")
            return dcgm.render_node(node, pods, self.clock.now(), self.energy), TEXT_CONTENT_TYPE
        return None

    def dcgm_targets(self, address: str) -> list[dict]:
        return dcgm.file_sd_targets(self.store.list_refs("nodes")[0], address)

    def keep_file_sd(self, path: str, address: str) -> None:
        """Write the DCGM targets to `path` for Prometheus' file_sd_configs now, and again
        whenever nodes come or go (Prometheus re-reads the file on change)."""
        self._file_sd = (path, address)
        self._write_file_sd()

    def _write_file_sd(self) -> None:
        if not self._file_sd:
            return
        path, address = self._file_sd
        text = json.dumps(self.dcgm_targets(address), indent=2) + "\n"
        with contextlib.suppress(FileNotFoundError), open(path) as handle:
            if handle.read() == text:
                return
        tmp = f"{path}.tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)  # atomic: Prometheus never reads half a file
