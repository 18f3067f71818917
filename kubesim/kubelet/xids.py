"""XIDs the GPU driver reports: the device plugin marks the GPU unhealthy (unless the
XID is the application's), and the pod on it crashes a moment later."""

from datetime import timedelta

from kubesim import cluster
from kubesim.apiserver.errors import ApiError, NotFound
from kubesim.clock import format_time
from kubesim.controllers import scheduler, xid
from kubesim.controllers.base import Controller
from kubesim.kubelet import runtime


class Xids(Controller):
    def __init__(self, store, recorder, kubelet, wake):
        super().__init__(store, recorder)
        self.kubelet = kubelet  # writes the crashed pod's logs
        self._wake = wake  # wakes the control loop for the crash
        # (when, pod uid, namespace, name, gpu, XID, resource): pods an XID crashes later.
        self._xid_crashes: list[tuple] = []

    def inject(self, name: str, gpu: int, code: int) -> dict:
        """POST /_sim/nodes/{name}/gpus/{gpu}/xid: the driver reports an XID on one GPU.
        The pod using that GPU crashes xid.CRASH_AFTER seconds of the sim clock later
        (its next CUDA call fails), so the exporter shows the XID with the pod still on
        the GPU first, as the generated history does; unless the XID is one the device
        plugin puts down to the application, the GPU turns unhealthy and the node's
        allocatable for its resource drops at once, as the device plugin reports it."""
        now = self.clock.now()
        crash_at = now + timedelta(seconds=xid.CRASH_AFTER)
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            devices = [d for d in cluster.node_devices(node) if d.gpu == gpu]
            if not devices:
                raise NotFound(message=f'node "{name}" has no GPU {gpu}')
            allocatable = xid.allocatable_after(node, devices, code)
            node["metadata"]["annotations"] = xid.with_event(node, gpu, code, format_time(now))
            node = self.store.update("nodes", None, node)
            if allocatable is not None:
                status = node["status"]
                node = self.store.update(
                    "nodes",
                    None,
                    {**node, "status": {**status, "allocatable": allocatable}},
                    subresource="status",
                )
            keys = {d.key for d in devices}
            pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
            crashing = []
            for pod in pods:
                if scheduler.is_active(pod) and keys & set(scheduler.held_device_keys(pod)):
                    meta = pod["metadata"]
                    self._xid_crashes.append(
                        (crash_at, meta["uid"], meta["namespace"], meta["name"], gpu, code,
                         devices[0].resource)
                    )  # fmt: skip
                    crashing.append(f"{meta['namespace']}/{meta['name']}")
        self._wake()
        return {
            "node": name,
            "gpu": gpu,
            "code": code,
            "message": xid.message(code),
            "healthy": gpu not in xid.unhealthy_gpus(node),
            "allocatable": node["status"]["allocatable"],
            "crashing": crashing,
            "crash_at": format_time(crash_at) if crashing else None,
        }

    def crash_due(self, now) -> None:
        """The pods XIDs hit crash once their moment has come on the sim clock (at that
        moment, however late the loop comes to it), unless the run ended by itself
        first or the pod is gone."""
        with self.store.lock:
            due = sorted(c for c in self._xid_crashes if c[0] <= now)
            self._xid_crashes = [c for c in self._xid_crashes if c[0] > now]
            for when, uid, namespace, name, gpu, code, resource in due:
                try:
                    pod = self.store.get("pods", namespace, name)
                except ApiError:
                    continue
                if pod["metadata"].get("uid") != uid:
                    continue
                started = runtime.run_started_at(pod)
                duration = runtime.parse_duration(runtime.annotation(pod, "duration"))
                if started and started + timedelta(seconds=duration) <= when:
                    continue  # it ended by itself first: the kubelet finishes it
                self._crash_on_xid(pod, gpu, code, resource, when)

    def _crash_on_xid(self, pod: dict, gpu: int, code: int, resource: str, now) -> None:
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        status = runtime.killed_status(pod, now, exit_code=1)
        self._write_status("pods", {**pod, "status": status})
        started = runtime.run_started_at(pod)
        crash = (
            f"{format_time(now)} RuntimeError: CUDA error: unspecified launch failure "
            f"(GPU {gpu}: Xid {code}, {xid.message(code)})\n"
        )
        users = {
            c["name"]
            for c in pod["spec"].get("containers") or []
            if resource in ((c.get("resources") or {}).get("limits") or {})
        }
        if started:
            self.kubelet.log_each(
                pod,
                lambda name: (
                    (crash if name in users else "") + runtime.end_log(pod, started, now, name, 1)
                ),
            )
