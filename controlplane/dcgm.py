"""dcgm-exporter pages for any API server's GPU nodes, from the pods bound to them.

No dcgm-exporter can run without GPUs, so this stands in for its DaemonSet: one
page per GPU node (`/metrics/dcgm/<node>`), rendered by kubesim's exporter
(kubesim/exporters/dcgm.py: the same fields, labels and utilisation model) from the
nodes and running pods that the API server holds, so billing meters a real
cluster with real kube-state-metrics series beside it. `/targets` lists the
pages as Prometheus http_sd target groups.

Which GPUs a pod holds is the device plugin's choice; on a real cluster no
object records it. kubesim writes it on the pod (`kubesim.io/gpu-devices`);
elsewhere this exporter makes the choice itself, as the plugin does, lowest
free devices first, and remembers it for the pod's life.

DRA is the exception: there the scheduler chooses and the ResourceClaim's
`status.allocation` records it. The devices of ResourceSlices are GPUs of
their node (as dcgm-exporter labels them: `cluster.inventory.exporter_device`),
and a pod a claim is reserved for holds the devices allocated to that claim.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cluster import inventory
from cluster.devices import parse_quantity
from kubesim.cluster import Device, gpu_uuid
from kubesim.controllers.scheduler import DEVICES_ANNOTATION, assign_devices, held_device_keys
from kubesim.exporters import dcgm

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
        self._listed = (0.0, [], [], {})
        self._server = None
        self._dra_served = True

    # --- what the pages show ---

    def state(self) -> tuple[list[dict], list[dict], dict[str, list[Device]]]:
        """(nodes, running pods with the devices they hold, node -> DRA devices),
        listed at most once a second."""
        with self._lock:
            listed_at, nodes, pods, dra = self._listed
            if time.monotonic() - listed_at > REFRESH_SECONDS:
                nodes = self.api.list("Node")
                pods = self.api.list("Pod", field_selector="status.phase=Running")
                slices, claims = self._dra_lists()
                dra, held = dra_devices(slices, claims)
                pods = self._with_devices(nodes, pods, held)
                self._listed = (time.monotonic(), nodes, pods, dra)
            return nodes, pods, dra

    def _dra_lists(self) -> tuple[list[dict], list[dict]]:
        """ResourceSlices and ResourceClaims, or none on a server without DRA."""
        from cluster.kube import PermanentClusterError

        if not self._dra_served:
            return [], []
        try:
            return self.api.list("ResourceSlice"), self.api.list("ResourceClaim")
        except PermanentClusterError as exc:
            if exc.status != 404:
                raise
            self._dra_served = False
            return [], []

    def _with_devices(
        self, nodes: list[dict], pods: list[dict], dra_held: dict[str, list[str]]
    ) -> list[dict]:
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
            if uid in dra_held:
                self._devices[uid] = ",".join(dra_held[uid])
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
        nodes, pods, dra = self.state()
        if node_name is None:
            return dcgm.render(nodes, pods, self.clock(), meter=self.meter)
        node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
        if node is None or not (dcgm.is_exporter_node(node) or node_name in dra):
            return None
        devices = dra.get(node_name)
        return dcgm.render_node(node, pods, self.clock(), meter=self.meter, devices=devices)

    def targets(self) -> list[dict]:
        nodes, _, dra = self.state()
        return dcgm.file_sd_targets(nodes, f"{HOST}:{self.port}", also=set(dra))

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


def dra_devices(slices: list[dict], claims: list[dict]) -> tuple[dict, dict]:
    """({node: [Device]} of the slices' GPUs and MIG devices, {pod uid: [device
    key]} of the devices claims reserved for pods were allocated)."""
    by_key, on_node = {}, {}
    for found in inventory.slice_devices(slices):
        labels = inventory.exporter_device(found.node, found.name)
        if labels is None or not found.node:
            continue
        attributes = {
            k.rsplit("/", 1)[-1]: v for k, v in (found.spec.get("attributes") or {}).items()
        }
        memory = (found.spec.get("capacity") or {}).get("memory", {}).get("value", "0")
        gpu = int(labels[1])
        device = Device(
            node=found.node,
            gpu=gpu,
            uuid=gpu_uuid(found.node, gpu),
            pci_bus_id=f"00000000:{gpu + 7:02X}:00.0",
            model_name=(attributes.get("productName") or {}).get("string", "NVIDIA GPU"),
            resource="",
            memory_mib=int(parse_quantity(memory) / 2**20),
            mig_profile=(attributes.get("profile") or {}).get("string") if labels[2] else None,
            gpu_instance_id=int(labels[2]) if labels[2] else None,
        )
        by_key[found.key] = device
        on_node.setdefault(found.node, []).append(device)
    held = {}
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        keys = [
            by_key[k].key
            for r in results
            if (k := (r.get("driver"), r.get("pool"), r.get("device"))) in by_key
        ]
        for reserved in status.get("reservedFor") or []:
            if reserved.get("resource") == "pods":
                held.setdefault(reserved.get("uid"), []).extend(keys)
    return on_node, held
