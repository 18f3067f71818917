"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (with the
admission plugins and RBAC a real cluster runs), kube-controller-manager,
kube-scheduler, KWOK keeping GPU nodes alive and running their pods, and
kube-state-metrics and a DCGM exporter page per node beside them.

`ControlPlane(directory).start()` brings it up in seconds once the binaries
are built (`make cluster-binaries`); `stop()` ends every process and forgets
etcd's data. Everything it writes (certificates, kubeconfigs, logs, etcd)
lives under `directory`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import yaml

from controlplane import nodes, pki
from controlplane.binaries import binary, missing

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
ADMIN = ("kubernetes-admin", ("system:masters",))


class ControlPlaneError(RuntimeError):
    """A component did not start; the message names it and its log."""


# The HTTP method of an audit event's verb (the audit log names verbs, not methods).
METHOD_OF_VERB = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def kubeconfig(url: str, ca: Path, cert: Path, key: Path, *, name="gpu-portal") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url, "certificate-authority": str(ca)}}],
        "users": [
            {"name": name, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
    }


class ControlPlane:
    """One control plane. `port` 0 picks a free port for the API server."""

    def __init__(
        self,
        directory: str | Path,
        *,
        port: int = 0,
        cluster_file: str | Path | None = None,
        node_monitor_grace_seconds: int = 20,
        ksm_port: int = 0,
        dcgm_port: int = 0,
        dra: bool = False,
        log=print,
    ):
        self.directory = Path(directory)
        self.port = port or free_port()
        self.cluster_file = cluster_file
        self.dra = dra  # build the cluster file's draPools and publish their slices
        self.node_monitor_grace_seconds = node_monitor_grace_seconds
        self.log = log
        self.url = f"https://{HOST}:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}
        self.kubeconfig_path = self.directory / "kubeconfig"
        self.ksm_port, self.dcgm_port = ksm_port, dcgm_port
        self.dcgm = None
        self._etcd_data = None
        self._timers: list[threading.Timer] = []

    # --- start and stop ---

    def start(self) -> ControlPlane:
        absent = missing()
        if absent:
            raise ControlPlaneError(absent)
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        try:
            self._start_etcd()
            self._start_apiserver()
            self._start_controllers()
            self._start_kwok()
            self.create_nodes()
            self._start_exporters()
        except BaseException:
            self.stop()
            raise
        self.log(f"control plane up in {time.monotonic() - started:.1f} s at {self.url}")
        return self

    def stop(self):
        for timer in self._timers:
            timer.cancel()
        if self.dcgm is not None:
            self.dcgm.stop()
            self.dcgm = None
        for _name, process in reversed(list(self.processes.items())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        # kube-apiserver's graceful shutdown waits for its long-running requests;
        # a throwaway cluster need not: whatever is still up after a moment is killed.
        deadline = time.monotonic() + 5
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        if self._etcd_data:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- components ---

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        log_path = self.directory / "logs" / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the runner, which stops them in order
                preexec_fn=_die_with_parent,
            )
        process.log_path = log_path
        process.command = command
        self.processes[name] = process
        return process

    def restart_apiserver(self):
        """Kill kube-apiserver and start it again (its watch cache starts afresh at
        the current resourceVersion, as after a crash)."""
        old = self.processes["kube-apiserver"]
        old.kill()
        old.wait(timeout=30)
        self._spawn("kube-apiserver", old.command)
        self._wait("kube-apiserver", lambda: self.get("/readyz", raw=True) == "ok", timeout=90)

    def _wait(self, name: str, ready, timeout: float = 60.0):
        """Poll `ready()` until true; fail with the component's log if it died or took too long."""
        process = self.processes[name]
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited ({process.returncode}):\n{self._tail(name)}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{name} not ready after {timeout:.0f} s:\n{self._tail(name)}"
                )
            time.sleep(0.1)

    def _tail(self, name: str, lines: int = 30) -> str:
        path = self.processes[name].log_path
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _start_etcd(self):
        self._etcd_data = tempfile.mkdtemp(prefix="gpu-portal-etcd-")
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://{HOST}:{client}"
        self._spawn(
            "etcd",
            [
                binary("etcd"),
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://{HOST}:{peer}",
                f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
                f"--initial-cluster=default=http://{HOST}:{peer}",
                "--unsafe-no-fsync",  # a throwaway store: durability buys nothing here
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: json.loads(_get(self.etcd_url + "/health"))["health"] == "true")

    def _start_apiserver(self):
        pki_dir = self.directory / "pki"
        self.authority = pki.Authority(pki_dir)
        serving = self.authority.issue("kube-apiserver", hosts=(HOST,))
        self._kubelet_client = self.authority.issue(
            "kube-apiserver-kubelet-client", groups=("system:masters",)
        )
        self.sa_public, self.sa_private = pki.service_account_keys(pki_dir)
        audit_policy = self.directory / "audit-policy.yaml"
        audit_policy.write_text((HERE / "audit-policy.yaml").read_text())
        self.audit_log = self.directory / "logs" / "audit.log"
        self._spawn(
            "kube-apiserver",
            [
                binary("kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={self.port}",
                f"--cert-dir={pki_dir}",
                f"--tls-cert-file={serving[0]}",
                f"--tls-private-key-file={serving[1]}",
                f"--client-ca-file={self.authority.cert_path}",
                f"--kubelet-client-certificate={self._kubelet_client[0]}",
                f"--kubelet-client-key={self._kubelet_client[1]}",
                "--kubelet-preferred-address-types=InternalIP",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={self.sa_public}",
                f"--service-account-signing-key-file={self.sa_private}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=Node,RBAC",
                # The defaults (NamespaceLifecycle, LimitRanger, ServiceAccount,
                # DefaultTolerationSeconds, PodSecurity, Priority, ResourceQuota,
                # the webhooks, ...) plus what a GPU cluster usually adds.
                "--enable-admission-plugins=NodeRestriction,ExtendedResourceToleration",
                "--allow-privileged=true",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=200",
                "--profiling=false",
                "--endpoint-reconciler-type=none",
                "--v=1",
            ],
        )
        admin_cert = self.authority.issue(ADMIN[0], groups=ADMIN[1])
        self.kubeconfig_path.write_text(
            yaml.safe_dump(kubeconfig(self.url, self.authority.cert_path, *admin_cert))
        )
        self._admin_cert = admin_cert
        self._wait("kube-apiserver", lambda: self.get("/readyz", raw=True) == "ok", timeout=90)

    def user_kubeconfig(self, user: str, groups=(), path: str | Path | None = None) -> Path:
        """A kubeconfig authenticating as `user` in `groups` (a client certificate)."""
        cert = self.authority.issue(user, groups=groups)
        path = Path(path or self.directory / f"{user.replace(':', '-')}.kubeconfig")
        path.write_text(yaml.safe_dump(kubeconfig(self.url, self.authority.cert_path, *cert)))
        return path

    def _start_controllers(self):
        manager = self.user_kubeconfig("system:kube-controller-manager")
        scheduler = self.user_kubeconfig("system:kube-scheduler")
        grace = self.node_monitor_grace_seconds
        self._spawn(
            "kube-controller-manager",
            [
                binary("kube-controller-manager"),
                f"--kubeconfig={manager}",
                f"--authentication-kubeconfig={manager}",
                f"--authorization-kubeconfig={manager}",
                f"--bind-address={HOST}",
                "--secure-port=0",
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.sa_private}",
                f"--root-ca-file={self.authority.cert_path}",
                f"--node-monitor-grace-period={grace}s",
                "--node-monitor-period=2s",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-job-syncs=20",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                binary("kube-scheduler"),
                f"--kubeconfig={scheduler}",
                f"--authentication-kubeconfig={scheduler}",
                f"--authorization-kubeconfig={scheduler}",
                f"--bind-address={HOST}",
                "--secure-port=0",
                "--leader-elect=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
        )
        # Ready when the service-account controller has made `default` in a namespace.
        self._wait(
            "kube-controller-manager",
            lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
        )

    def _start_kwok(self):
        self.kwok_port = free_port()
        config = self.directory / "kwok.yaml"
        logs_file = self.directory / "container.log"
        logs_file.write_text(nodes.container_log(datetime.now(UTC)))
        stages = (HERE / "kwok.yaml").read_text()
        config.write_text(stages + nodes.cluster_logs(logs_file))
        kwok_cert = self.authority.issue("kwok", hosts=(HOST,))
        kwok_client = self.user_kubeconfig("kwok-controller", groups=("system:masters",))
        self._spawn(
            "kwok",
            [
                binary("kwok"),
                f"--kubeconfig={kwok_client}",
                f"--config={config}",
                f"--server-address={HOST}:{self.kwok_port}",
                f"--tls-cert-file={kwok_cert[0]}",
                f"--tls-private-key-file={kwok_cert[1]}",
                f"--node-ip={HOST}",
                f"--node-port={self.kwok_port}",
                "--cidr=10.244.0.1/16",
            ],
        )

    def create_nodes(self, cluster_file=None):
        """The cluster file's nodes (kubesim's format), as KWOK nodes; waits until Ready."""
        path = cluster_file or self.cluster_file
        made = nodes.kwok_nodes(path, kubelet_port=self.kwok_port)
        if self.dra:
            made += nodes.dra_nodes(path, kubelet_port=self.kwok_port)
        self.node_objects = made
        for node in made:
            self.call("POST", "/api/v1/nodes", node)
        names = {node["metadata"]["name"] for node in made}

        def all_ready():
            listed = self.get("/api/v1/nodes")["items"]
            ready = {n["metadata"]["name"] for n in listed if nodes.is_ready(n)}
            return names <= ready

        self._wait("kwok", all_ready, timeout=120)
        if self.dra:
            # What NVIDIA's DRA driver would publish on the DRA nodes.
            for obj in nodes.dra_objects(path):
                plural = "deviceclasses" if obj["kind"] == "DeviceClass" else "resourceslices"
                self.call("POST", f"/apis/resource.k8s.io/v1/{plural}", obj)
        return sorted(names)

    def _start_exporters(self):
        from controlplane.dcgm import DcgmExporter

        self.ksm_port = self.ksm_port or free_port()
        ksm = self.user_kubeconfig("kube-state-metrics", groups=("system:masters",))
        self._spawn(
            "kube-state-metrics",
            [
                binary("kube-state-metrics"),
                f"--kubeconfig={ksm}",
                f"--host={HOST}",
                f"--port={self.ksm_port}",
                f"--telemetry-host={HOST}",
                f"--telemetry-port={free_port()}",
                "--resources=pods,nodes,namespaces,jobs,replicasets,resourcequotas",
                "--metric-labels-allowlist=pods=[*],nodes=[*],namespaces=[*],jobs=[*]",
            ],
        )
        ksm_url = f"http://{HOST}:{self.ksm_port}"
        self._wait("kube-state-metrics", lambda: "kube_node_info" in _get(ksm_url + "/metrics"))
        self.dcgm = DcgmExporter(self.kubeconfig_path, port=self.dcgm_port).start()
        self.dcgm_port = self.dcgm.port

    # --- faults on demand ---

    def reclaim(self, node: str, *, grace_seconds: int = 30) -> list[str]:
        """A spot reclaim, as a cloud's interruption handler does it: cordon the node,
        evict each pod through the Eviction API (the pod gets the DisruptionTarget
        condition), and delete the node when the notice is over (the pod garbage
        collector then deletes what is left on it). Returns the pods evicted."""
        self.call("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}},
                  content_type="application/merge-patch+json")  # fmt: skip
        evicted = []
        for pod in self.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")["items"]:
            meta = pod["metadata"]
            eviction = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "deleteOptions": {"gracePeriodSeconds": grace_seconds},
            }
            with contextlib.suppress(urllib.error.HTTPError):  # gone meanwhile
                self.call(
                    "POST",
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction",
                    eviction,
                )
                evicted.append(f"{meta['namespace']}/{meta['name']}")
        timer = threading.Timer(grace_seconds, self._delete_node, [node])
        timer.daemon = True
        timer.start()
        self._timers.append(timer)
        return evicted

    def _delete_node(self, node: str):
        with contextlib.suppress(urllib.error.HTTPError, OSError):
            self.call("DELETE", f"/api/v1/nodes/{node}")

    def stop_heartbeats(self, node: str, stopped: bool = True):
        """KWOK stops (or resumes) renewing the node's lease and status: after the
        controller manager's node-monitor grace period the node is NotReady (Unknown),
        tainted unreachable, and its pods are evicted as on a real cluster."""
        value = None if stopped else nodes.KWOK_MANAGED
        self.call("PATCH", f"/api/v1/nodes/{node}",
                  {"metadata": {"labels": {nodes.KWOK_LABEL: value}}},
                  content_type="application/merge-patch+json")  # fmt: skip

    # --- the API, as the cluster's admin ---

    def _context(self):
        context = ssl.create_default_context(cafile=str(self.authority.cert_path))
        context.load_cert_chain(*map(str, self._admin_cert))
        return context

    def call(
        self, method: str, path: str, body=None, *, content_type="application/json", raw=False
    ):
        data = (
            None
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": content_type}
        )
        with urllib.request.urlopen(request, timeout=30, context=self._context()) as response:
            text = response.read().decode()
        return text if raw else (json.loads(text) if text else {})

    def get(self, path: str, raw=False):
        """GET as the admin; None for a 404."""
        try:
            return self.call("GET", path, raw=raw)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise


def _die_with_parent():
    """In the child: be killed if the process that started it dies without stopping it
    (a test run killed mid-way), so no control plane outlives its runner."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()
