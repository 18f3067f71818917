"""KubeSim: the store, clock and faults behind one HTTP server, plus the control plane."""

import collections
import json
import os
import secrets
import threading

from kubesim import control
from kubesim.apiserver.auth import Auth
from kubesim.apiserver.faults import Faults
from kubesim.apiserver.registry import Store
from kubesim.apiserver.server import KubeSimServer
from kubesim.clock import Clock
from kubesim.kubeconfig import write_kubeconfig


class KubeSim:
    def __init__(
        self, *, speed: float = 1.0, clock: Clock | None = None, request_log_size: int = 20000
    ):
        self.clock = clock or Clock(speed=speed)
        self.store = Store(self.clock)
        self.faults = Faults()
        self.request_log: collections.deque = collections.deque(maxlen=request_log_size)
        self.metrics_provider = None  # Callable[[], str]: Prometheus text for GET /metrics
        # Callable[[path, address], (text, content type) | None] for GET /metrics/<path>
        self.metrics_pages = None
        self.controllers: list = []  # objects with start()/stop(), run while the server runs
        self.stopping = threading.Event()
        # Seconds of real time between BOOKMARKs on a watch that allows them (the
        # apiserver sends one about every minute); tests shorten it.
        self.bookmark_interval = 60.0
        self.kubeconfig_path: str | None = None
        # None: every request is served as it comes (like `kubectl proxy`);
        # enable_auth() turns on bearer tokens and RBAC.
        self.auth: Auth | None = None
        self.certificates = None  # enable_tls(): serve HTTPS with a CA of its own
        self._server: KubeSimServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_cluster_file(
        cls,
        path: str | None = None,
        *,
        speed: float = 1.0,
        state: str | None = None,
        control_plane: bool = True,
        auth: bool = False,
        token_auth_file: str | None = None,
        tls: bool = False,
    ):
        """A simulator with the cluster described in `path` (default: the demo cluster)
        installed by kubesim.control, and the saved state loaded when given.

        control_plane=False gives a bare API server (no nodes, controllers or quota
        admission): what the API tests use so nothing writes behind their back.
        auth=True (implied by a token_auth_file) authenticates and authorizes every
        API request (see kubesim/apiserver/auth.py)."""
        sim = cls(speed=speed)
        if tls:
            sim.enable_tls()
        if auth or token_auth_file:
            sim.enable_auth(token_auth_file)
        if state and os.path.exists(state):
            with open(state) as handle:
                sim.store.load(json.load(handle))
        if control_plane:
            control.install(sim, path)
        return sim

    def enable_auth(self, token_auth_file: str | None = None) -> Auth:
        """Bearer tokens (from the file, and any added later) and RBAC from here on.
        `admin_token` is a cluster admin's (group system:masters, like kubeadm's
        admin.conf): the kubeconfigs kubesim writes use it unless given another."""
        self.auth = Auth(self.store, token_auth_file)
        self.admin_token = self.auth.add_token(
            secrets.token_urlsafe(24), "kubesim-admin", groups=["system:masters"]
        )
        return self.auth

    def enable_tls(self):
        """Serve HTTPS (before start()); the kubeconfigs written trust kubesim's CA."""
        from kubesim.apiserver.tls import Certificates  # cryptography, only when asked for

        self.certificates = Certificates()
        return self.certificates

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("kubesim is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        scheme = "https" if self.certificates else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self, port: int = 0, host: str = "127.0.0.1") -> int:
        self.stopping.clear()
        tls = self.certificates.server_context() if self.certificates else None
        self._server = KubeSimServer((host, port), self, tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="kubesim-http",
            daemon=True,
        )
        self._thread.start()
        for controller in self.controllers:
            controller.start()
        return self.port

    def serve_forever(self, port: int = 0, host: str = "127.0.0.1") -> None:
        """Run in the calling thread (the CLI) until stop() or KeyboardInterrupt."""
        self.start(port, host)
        try:
            self._thread.join()
        finally:
            self.stop()

    def stop(self) -> None:
        self.stopping.set()  # ends open watches
        for controller in reversed(self.controllers):
            controller.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def write_kubeconfig(self, path: str, *, token: str | None = None) -> str:
        """A kubeconfig for this simulator (with a bearer token, when given); the
        first one written is `kubeconfig_path`."""
        if token is None and self.auth is not None:
            token = self.admin_token
        ca = self.certificates.ca_pem if self.certificates else None
        written = write_kubeconfig(path, self.url, token=token, ca_pem=ca)
        self.kubeconfig_path = self.kubeconfig_path or written
        return path

    def save_state(self, path: str) -> None:
        with self.store.lock:
            state = self.store.dump()
            text = json.dumps(state)
        tmp = path + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
