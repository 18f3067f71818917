"""HTTP front end: routing, discovery, the admin API, faults and the request log; each
verb is answered by its handler (handlers.py).

Plain HTTP/1.1 with keep-alive on a ThreadingHTTPServer: each connection gets a
thread, which is plenty for tests and the benchmark's handful of clients.
"""

import contextlib
import json
import socket
import ssl
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from kubesim.exposition import TEXT_CONTENT_TYPE

from . import admin, handlers, protobuf
from .auth import current_user, describe
from .errors import (
    ApiError,
    BadRequest,
    InternalError,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    UnsupportedMediaType,
)
from .resources import RESOURCES, group_versions

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36",
    "gitVersion": "v1.37.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class DroppedConnection(Exception):
    pass


class KubeSimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, sim, tls=None):
        self.sim = sim
        self.tls = tls  # an ssl.SSLContext: serve HTTPS
        # Open connections (accepted socket -> the one served, TLS-wrapped or not),
        # dropped with the server as a real one's are.
        self.connections = {}
        self.connections_lock = threading.Lock()
        super().__init__(address, Handler)

    def process_request(self, request, client_address):
        with self.connections_lock:
            self.connections[request] = request
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.connections_lock:
            self.connections.pop(request, None)
        super().shutdown_request(request)

    def server_close(self):
        """Stop listening and drop every open connection: a keep-alive client of a
        stopped server finds it gone, not still answering."""
        super().server_close()
        with self.connections_lock:
            served = list(self.connections.values())
        for connection in served:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def finish_request(self, request, client_address):
        # The TLS handshake in the connection's own thread, not the accepting one.
        served = request
        if self.tls is not None:
            try:
                served = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
            with self.connections_lock:
                if request in self.connections:
                    self.connections[request] = served
        super().finish_request(served, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
    # client's delayed ACK adds ~40 ms to every keep-alive request.
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return "kubesim"

    def log_message(self, format, *args):
        pass  # the request log at /_sim/requests replaces the access log

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")

    # --- plumbing ---

    @property
    def sim(self):
        return self.server.sim

    def _handle(self, method: str) -> None:
        self._started = time.monotonic()
        self._logged = False
        split = urlsplit(self.path)
        path = unquote(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self._entry = {
            "verb": "",
            "method": method,
            "path": path,
            "resource": None,
            "namespace": None,
            "name": None,
            "subresource": None,
            "status": 0,
        }
        self._raw_body = self._read_body()
        try:
            if path.startswith("/_sim/"):
                self._entry["verb"] = "admin"
                self.send_json(200, admin.answer(self.sim, method, path, self.body() or {}))
            elif path == "/metrics" or path.startswith("/metrics/"):
                self._entry["verb"] = "get"
                self._metrics(path)
            else:
                self._authenticated_api(method, path, query)
        except DroppedConnection:
            self._entry["status"] = 0
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        except ApiError as error:
            if getattr(error, "attributes", None) is not None:
                self._entry["forbidden"] = describe(error.attributes)
            self.send_json(error.code, error.to_status(), headers=error.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in kubesim: say so like the apiserver would
            traceback.print_exc(file=sys.stderr)
            self.send_json(500, InternalError(f"Internal error occurred: {exc!r}").to_status())
        finally:
            self._log()

    def _metrics(self, path: str) -> None:
        """/metrics (all DCGM devices), /metrics/dcgm/{node}, /metrics/kube-state-metrics
        and /metrics/dcgm-targets.json (file_sd / http_sd target groups)."""
        if path == "/metrics":
            provider = self.sim.metrics_provider
            text = provider() if provider else ""
            self.send(200, text.encode(), TEXT_CONTENT_TYPE)
            return
        pages = self.sim.metrics_pages
        host, port = self.server.server_address[:2]
        address = self.headers.get("Host") or f"{host}:{port}"
        page = pages(path[len("/metrics/") :], address) if pages else None
        if page is None:
            self.send(404, f"404 page not found: {path}\n".encode(), "text/plain; charset=utf-8")
            return
        text, content_type = page
        self.send(200, text.encode(), content_type)

    def _log(self) -> None:
        """Record the request once, before its response is written: a client that has
        its answer must find the request in the log."""
        if self._logged:
            return
        self._logged = True
        self._entry["duration_ms"] = round((time.monotonic() - self._started) * 1000, 3)
        self._entry["time"] = self.sim.clock.timestamp()
        self.sim.request_log.append(self._entry)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def body(self):
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0]
        if not self._raw_body:
            return None
        if content_type == protobuf.CONTENT_TYPE:
            return protobuf.decode(self._raw_body)
        if "protobuf" in content_type or "cbor" in content_type:
            raise UnsupportedMediaType(content_type)
        try:
            if content_type.endswith("yaml"):
                return yaml.safe_load(self._raw_body)
            return json.loads(self._raw_body)
        except (ValueError, yaml.YAMLError) as exc:
            raise BadRequest(f"the body of the request could not be decoded: {exc}") from None

    def send(self, status: int, payload: bytes, content_type: str, headers=None) -> None:
        self._entry["status"] = status
        self._log()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def send_json(self, status: int, obj, headers=None) -> None:
        payload = json.dumps(obj, separators=(",", ":")).encode()
        self.send(status, payload, "application/json", headers)

    # --- Kubernetes API ---

    def _authenticated_api(self, method: str, path: str, query: dict) -> None:
        """Who asks (401) and whether they may (403), when kubesim has auth on."""
        auth = self.sim.auth
        self._user = self._attributes = None
        if auth is None:
            return self._api(method, path, query)
        self._user = auth.authenticate(self.headers.get("Authorization"))
        self._entry["user"] = self._user.name
        self._attributes = auth.authorize(self._user, method, path, query)
        if self._attributes.resource_request:
            # As the apiserver's audit log does (objectRef from the request info): the
            # request is logged as what was authorized, even for a resource kubesim
            # does not serve (resource.k8s.io: 404 once authorized).
            self._entry.update(
                verb=self._attributes.verb,
                resource=self._attributes.resource,
                namespace=self._attributes.namespace or None,
                name=self._attributes.name or None,
                subresource=self._attributes.subresource or None,
            )
        token = current_user.set(self._user)
        try:
            self._api(method, path, query)
        finally:
            current_user.reset(token)

    def _api(self, method: str, path: str, query: dict) -> None:
        if path in ("/healthz", "/readyz", "/livez"):
            self._entry["verb"] = "get"
            self.send(200, b"ok", "text/plain; charset=utf-8")
            return
        action, status, latency = self.sim.faults.decide(method, path)
        if latency:
            time.sleep(latency)
        if action == "drop":
            raise DroppedConnection()
        if action == "error":
            self._entry["verb"] = VERB_BY_METHOD.get(method, "get")
            if status == 429:
                raise TooManyRequests(retry_after=self.sim.faults.config.retry_after)
            if status == 503:
                raise ServiceUnavailable()
            error = InternalError()
            error.code = status
            raise error
        if method == "GET" and self._discovery(path):
            return
        self._resource_request(method, path, query)

    def _discovery(self, path: str) -> bool:
        if path.startswith("/openapi/v3"):
            self._entry["verb"] = "get"
            document = _openapi_v3(path[len("/openapi/v3") :].strip("/"))
            if document is None:
                raise NotFound(message="the server could not find the requested resource")
            self.send_json(200, document)
        elif path in ("/version", "/version/"):
            self._entry["verb"] = "get"
            self.send_json(200, KUBERNETES_VERSION)
        elif path in ("/api", "/api/"):
            self._entry["verb"] = "get"
            address = f"127.0.0.1:{self.server.server_address[1]}"
            self.send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": address}
                    ],
                },
            )
        elif path in ("/apis", "/apis/"):
            self._entry["verb"] = "get"
            self.send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        _api_group(gv.split("/")[0], gv.split("/")[1])
                        for gv in group_versions()
                        if "/" in gv
                    ],
                },
            )
        elif path.rstrip("/") in ("/api/v1",) or (
            path.startswith("/apis/")
            and path.rstrip("/").count("/") == 3
            and path.rstrip("/")[6:] in group_versions()
        ):
            self._entry["verb"] = "get"
            gv = "v1" if path.startswith("/api/") else path.rstrip("/")[6:]
            self.send_json(200, _resource_list(gv))
        elif path.startswith("/apis/") and path.rstrip("/").count("/") == 2:
            group = path.rstrip("/")[6:]
            versions = [gv for gv in group_versions() if gv.startswith(group + "/")]
            if not versions:
                return False
            self._entry["verb"] = "get"
            self.send_json(
                200,
                _api_group(group, versions[0].split("/")[1])
                | {"kind": "APIGroup", "apiVersion": "v1"},
            )
        else:
            return False
        return True

    def _route(self, path: str):
        """(resource type, namespace, name, subresource, watch) for an API path."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group_version, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise NotFound(message="the server could not find the requested resource")
        watch = bool(rest) and rest[0] == "watch"
        if watch:
            rest = rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise NotFound(message="the server could not find the requested resource")
        rtype = RESOURCES.get(rest[0])
        if (
            rtype is None
            or rtype.api_version != group_version
            or (namespace and not rtype.namespaced)
        ):
            raise NotFound(message="the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if subresource and subresource not in rtype.subresources:
            raise NotFound(message="the server could not find the requested resource")
        return rtype, namespace, name, subresource, watch

    def _resource_request(self, method: str, path: str, query: dict) -> None:
        rtype, namespace, name, subresource, watch = self._route(path)
        watch = watch or query.get("watch") in ("1", "true", "True")
        verb = {
            "GET": "watch" if watch else ("get" if name else "list"),
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, VERB_BY_METHOD.get(method, method.lower()))
        self._entry.update(
            verb=verb,
            resource=rtype.plural,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )
        request = handlers.Request(
            self,
            self.sim,
            rtype,
            namespace,
            name,
            subresource,
            query,
            user=self._user,
            attributes=self._attributes,
        )
        handlers.serve(request, method, verb)

    # --- answering (the handlers' side of the connection) ---

    def stream(self) -> None:
        """Start a chunked 200 (a watch): logged now, as the request is answered."""
        self._entry["status"] = 200
        self._log()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def chunk(self, event) -> None:
        """One event of a stream; None ends it."""
        if event is None:
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _api_group(group: str, version: str) -> dict:
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def _resource_list(group_version: str) -> dict:
    resources = []
    for rtype in group_versions()[group_version]:
        resources.append(
            {
                "name": rtype.plural,
                "singularName": rtype.singular,
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": rtype.verbs,
                **({"shortNames": list(rtype.short_names)} if rtype.short_names else {}),
                **({"categories": list(rtype.categories)} if rtype.categories else {}),
                "storageVersionHash": "",
            }
        )
        for sub in rtype.subresources:
            entry = {
                "name": f"{rtype.plural}/{sub}",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": "Pod" if sub == "log" else rtype.kind,
                "verbs": ["get"] if sub == "log" else ["get", "patch", "update"],
            }
            if sub == "eviction":
                # kubectl drain looks for this entry to choose the policy/v1 Eviction API.
                entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _openapi_v3(group_version_path: str) -> dict | None:
    """Just enough OpenAPI v3 for kubectl: the root listing, and per group-version the
    PATCH operations with their query parameters, from which kubectl learns that the
    server does field validation and dry runs (it then skips client-side validation,
    which would need the full schemas). Strategic merge keys come from kubectl's own
    built-in types, so no component schemas are served."""
    versions = group_versions()
    if not group_version_path:
        return {
            "paths": {
                ("api/v1" if gv == "v1" else f"apis/{gv}"): {
                    "serverRelativeURL": f"/openapi/v3/{'api/v1' if gv == 'v1' else 'apis/' + gv}"
                    "?hash=kubesim"
                }
                for gv in versions
            }
        }
    if group_version_path == "api/v1":
        group_version = "v1"
    elif group_version_path.startswith("apis/"):
        group_version = group_version_path[5:]
    else:
        return None
    if group_version not in versions:
        return None
    parameters = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in ("dryRun", "fieldManager", "fieldValidation", "force")
    ]
    paths = {}
    for rtype in versions[group_version]:
        gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        template = rtype.path("{namespace}" if rtype.namespaced else None, "{name}")
        paths[template] = {
            "patch": {
                "operationId": f"patch{rtype.kind}",
                "parameters": parameters,
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0-kubesim"},
        "paths": paths,
        "components": {"schemas": {}},
    }
