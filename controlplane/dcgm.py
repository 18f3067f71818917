"""dcgm-exporter pages for any API server's GPU nodes, from the pods bound to them.

No dcgm-exporter can run without GPUs, so this stands in for its DaemonSet: one
page per GPU node (`/metrics/dcgm/<node>`), rendered by kubesim's exporter
(kubesim/dcgm.py: the same fields, labels and utilisation model) from the
nodes and running pods that the API server holds, so billing meters a real
cluster with real kube-state-metrics series beside it. `/targets` lists the
pages as Prometheus http_sd target groups.

Which GPUs a pod holds is the device plugin's choice; on a real cluster no
object records it. kubesim writes it on the pod (`kubesim.io/gpu-devices`);
elsewhere this exporter makes the choice itself, as the plugin does, lowest
free devices first, and remembers it for the pod's life.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubesim import dcgm
from kubesim.scheduler import DEVICES_ANNOTATION, assign_devices, held_device_keys

HOST = "127.0.0.1"
REFRESH_SECONDS = 1.0  # one list of nodes and pods serves every page scraped within it


class DcgmExporter:
    def __init__(self, kubeconfig, *, port: int = 0, clock=lambda: datetime.now(UTC)):
        from cluster.kube import Cluster, load_configuration

        self.api = Cluster(load_configuration(str(kubeconfig)), timeout=10)
        self.port = port
        self.clock = clock
        self.meter = dcgm.EnergyMeter()
        self._devices: dict[str, str] = {}  # pod uid -> device keys it holds
        self._lock = threading.Lock()
        self._listed = (0.0, [], [])
        self._server = None

    # --- what the pages show ---

    def state(self) -> tuple[list[dict], list[dict]]:
        """(nodes, running pods with the devices they hold), listed at most once a second."""
        with self._lock:
            listed_at, nodes, pods = self._listed
            if time.monotonic() - listed_at > REFRESH_SECONDS:
                nodes = self.api.list("Node")
                pods = self.api.list("Pod", field_selector="status.phase=Running")
                pods = self._with_devices(nodes, pods)
                self._listed = (time.monotonic(), nodes, pods)
            return nodes, pods

    def _with_devices(self, nodes: list[dict], pods: list[dict]) -> list[dict]:
        by_node = {node["metadata"]["name"]: node for node in nodes}
        alive = {pod["metadata"]["uid"] for pod in pods}
        self._devices = {uid: keys for uid, keys in self._devices.items() if uid in alive}
        placed: dict[str, list[dict]] = {}
        result = []
        for pod in sorted(
            pods, key=lambda p: (p["status"].get("startTime", ""), p["metadata"]["name"])
        ):
            node = by_node.get(pod["spec"].get("nodeName"))
            if node is None:
                continue
            uid = pod["metadata"]["uid"]
            if not held_device_keys(pod):
                if uid not in self._devices:
                    devices = assign_devices(pod, node, placed.get(node["metadata"]["name"], []))
                    self._devices[uid] = ",".join(device.key for device in devices)
                annotations = {**(pod["metadata"].get("annotations") or {})}
                annotations[DEVICES_ANNOTATION] = self._devices[uid]
                pod = {**pod, "metadata": {**pod["metadata"], "annotations": annotations}}
            placed.setdefault(node["metadata"]["name"], []).append(pod)
            result.append(pod)
        return result

    def page(self, node_name: str | None = None) -> str | None:
        """One node's exporter page (None for a node without GPUs), or all of them."""
        nodes, pods = self.state()
        if node_name is None:
            return dcgm.render(nodes, pods, self.clock(), meter=self.meter)
        node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
        if node is None or not dcgm.is_exporter_node(node):
            return None
        return dcgm.render_node(node, pods, self.clock(), meter=self.meter)

    def targets(self) -> list[dict]:
        nodes, _ = self.state()
        return dcgm.file_sd_targets(nodes, f"{HOST}:{self.port}")

    # --- serving ---

    def start(self) -> DcgmExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?", 1)[0]
                if path == "/targets":
                    body, kind = json.dumps(exporter.targets()), "application/json"
                elif path == "/metrics" or path.startswith("/metrics/dcgm/"):
                    body = exporter.page(
                        path.removeprefix("/metrics").removeprefix("/dcgm/") or None
                    )
                    kind = "text/plain; version=0.0.4; charset=utf-8"
                else:
                    body = None
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer((HOST, self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="dcgm", daemon=True).start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.api.close()
