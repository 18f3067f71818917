"""HTTP front end: routing, discovery, watch streaming, faults and the request log.

Plain HTTP/1.1 with keep-alive on a ThreadingHTTPServer: each connection gets a
thread, which is plenty for tests and the benchmark's handful of clients.
"""

import contextlib
import json
import queue
import re
import socket
import ssl
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from kubesim.exporters.exposition import TEXT_CONTENT_TYPE

from . import protobuf
from .auth import access_review, current_user, describe
from .errors import (
    ApiError,
    BadRequest,
    Expired,
    FieldError,
    InternalError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    UnsupportedMediaType,
)
from .listing import list_page
from .resources import RESOURCES, group_versions
from .tables import to_table
from .validation import check_apply_config, check_structure

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
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": None,
}
VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


def _name_mismatch(body_name, url_name) -> str:
    return f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"


class DroppedConnection(Exception):
    pass


class KubeSimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, sim, tls=None):
        self.sim = sim
        self.tls = tls  # an ssl.SSLContext: serve HTTPS
        super().__init__(address, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake in the connection's own thread, not the accepting one.
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)


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
                self._admin(method, path)
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
            self._send_json(error.code, error.to_status(), headers=error.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in kubesim: say so like the apiserver would
            traceback.print_exc(file=sys.stderr)
            self._send_json(500, InternalError(f"Internal error occurred: {exc!r}").to_status())
        finally:
            self._log()

    def _metrics(self, path: str) -> None:
        """/metrics (all DCGM devices), /metrics/dcgm/{node}, /metrics/kube-state-metrics
        and /metrics/dcgm-targets.json (file_sd / http_sd target groups)."""
        if path == "/metrics":
            provider = self.sim.metrics_provider
            text = provider() if provider else ""
            self._send(200, text.encode(), TEXT_CONTENT_TYPE)
            return
        pages = self.sim.metrics_pages
        host, port = self.server.server_address[:2]
        address = self.headers.get("Host") or f"{host}:{port}"
        page = pages(path[len("/metrics/") :], address) if pages else None
        if page is None:
            self._send(404, f"404 page not found: {path}\n".encode(), "text/plain; charset=utf-8")
            return
        text, content_type = page
        self._send(200, text.encode(), content_type)

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

    def _body(self):
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

    def _send(self, status: int, payload: bytes, content_type: str, headers=None) -> None:
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

    def _send_json(self, status: int, obj, headers=None) -> None:
        payload = json.dumps(obj, separators=(",", ":")).encode()
        self._send(status, payload, "application/json", headers)

    # --- /_sim/ admin API (never subject to faults) ---

    def _admin(self, method: str, path: str) -> None:
        sim = self.sim
        body = self._body() or {}
        if path == "/_sim/requests":
            if method == "DELETE":
                sim.request_log.clear()
            self._send_json(200, {"items": list(sim.request_log)})
        elif path == "/_sim/faults":
            if method in ("PUT", "POST"):
                try:
                    sim.faults.set(**body)
                except (TypeError, ValueError) as exc:
                    raise BadRequest(str(exc)) from None
            elif method == "DELETE":
                sim.faults.clear()
            self._send_json(200, sim.faults.get())
        elif path == "/_sim/clock":
            if method == "POST":
                if "speed" in body:
                    sim.clock.set_speed(float(body["speed"]))
                if "advance" in body:
                    sim.clock.advance(float(body["advance"]))
            self._send_json(200, {"now": sim.clock.timestamp(), "speed": sim.clock.speed})
        elif path == "/_sim/state" and method == "GET":
            self._send_json(200, sim.store.dump())
        elif path == "/_sim/compact" and method == "POST":
            sim.store.compact()
            self._send_json(200, {"resourceVersion": sim.store.resource_version})
        elif path == "/_sim/nodes" and method == "GET" and getattr(sim, "control_plane", None):
            self._send_json(200, sim.control_plane.spot.node_report())
        elif path.startswith("/_sim/nodes/") and method == "POST":
            self._send_json(200, _node_admin(sim, path, body))
        else:
            raise NotFound(message=f"no such admin endpoint: {method} {path}")

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
            self._send(200, b"ok", "text/plain; charset=utf-8")
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
            self._send_json(200, document)
        elif path in ("/version", "/version/"):
            self._entry["verb"] = "get"
            self._send_json(200, KUBERNETES_VERSION)
        elif path in ("/api", "/api/"):
            self._entry["verb"] = "get"
            address = f"127.0.0.1:{self.server.server_address[1]}"
            self._send_json(
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
            self._send_json(
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
            self._send_json(200, _resource_list(gv))
        elif path.startswith("/apis/") and path.rstrip("/").count("/") == 2:
            group = path.rstrip("/")[6:]
            versions = [gv for gv in group_versions() if gv.startswith(group + "/")]
            if not versions:
                return False
            self._entry["verb"] = "get"
            self._send_json(
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
        store = self.sim.store
        if rtype.read_only and method != "GET":
            raise MethodNotAllowed()
        if rtype.plural == "selfsubjectaccessreviews":
            if method != "POST" or name:
                raise MethodNotAllowed()
            review = self._object_body(rtype, None, None, query)
            return self._send_json(201, access_review(self.sim.auth, self._user, review))
        dry_run = _dry_run(method, query)
        manager = query.get("fieldManager") or _manager_from_agent(self.headers.get("User-Agent"))

        if method == "GET" and watch:
            return self._watch(rtype, namespace, query)
        if method == "GET" and name is None:
            objs, list_meta = list_page(store, rtype, namespace, query)
            if self._wants_table():
                now = self.sim.clock.now()
                table = to_table(
                    rtype.plural,
                    objs,
                    list_meta["resourceVersion"],
                    now,
                    query.get("includeObject", "Metadata"),
                )
                table["metadata"] = list_meta
                return self._send_json(200, table)
            return self._send_json(
                200,
                {
                    "kind": rtype.list_kind,
                    "apiVersion": rtype.api_version,
                    "metadata": list_meta,
                    "items": objs,
                },
            )
        if method == "GET" and subresource == "log":
            return self._send(200, _pod_log(store, namespace, name, query), "text/plain")
        if method == "GET":
            obj = store.get_ref(rtype.plural, namespace, name)
            if self._wants_table():
                now = self.sim.clock.now()
                return self._send_json(
                    200,
                    to_table(
                        rtype.plural,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        now,
                        query.get("includeObject", "Metadata"),
                    ),
                )
            return self._send_json(200, obj)
        if method == "POST" and subresource == "eviction":
            return self._evict(namespace, name)
        if method == "POST" and name is None:
            body = self._object_body(rtype, namespace, None, query)
            created = store.create(
                rtype.plural, namespace, body, dry_run=dry_run, field_manager=manager
            )
            return self._send_json(201, created)
        if method == "PUT" and name:
            body = self._object_body(rtype, namespace, name, query)
            updated = store.update(
                rtype.plural,
                namespace,
                body,
                subresource=subresource,
                dry_run=dry_run,
                field_manager=manager,
            )
            return self._send_json(200, updated)
        if method == "PATCH" and name:
            return self._patch(rtype, namespace, name, subresource, query, manager, dry_run)
        if method == "DELETE":
            options = self._body() or {}
            policy = query.get("propagationPolicy") or options.get("propagationPolicy")
            orphan = query.get("orphanDependents") or options.get("orphanDependents")
            if policy is None and orphan in (True, "true"):
                policy = "Orphan"
            grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
            if name is None:
                deleted = store.delete_collection(
                    rtype.plural,
                    namespace,
                    label_selector=query.get("labelSelector"),
                    field_selector=query.get("fieldSelector"),
                    propagation_policy=policy,
                    grace_period_seconds=grace,
                )
                return self._send_json(
                    200,
                    {
                        "kind": rtype.list_kind,
                        "apiVersion": rtype.api_version,
                        "metadata": {"resourceVersion": store.resource_version},
                        "items": deleted,
                    },
                )
            deleted = store.delete(
                rtype.plural,
                namespace,
                name,
                propagation_policy=policy,
                dry_run=dry_run,
                preconditions=options.get("preconditions"),
                grace_period_seconds=grace,
            )
            if rtype.returns_deleted_object or deleted["metadata"].get("finalizers"):
                return self._send_json(200, deleted)  # marked, not gone yet
            return self._send_json(200, deleted_status(rtype, deleted))
        raise MethodNotAllowed()

    def _evict(self, namespace: str, name: str) -> None:
        """policy/v1 Eviction: no PodDisruptionBudgets exist here, so it is always allowed."""
        body = self._body()
        if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
            raise BadRequest("the body of the request was not a policy/v1 Eviction")
        if (body.get("metadata") or {}).get("name") != name:
            raise BadRequest("name in URL does not match name in Eviction object")
        self.sim.store.evict(namespace, name, body.get("deleteOptions"))
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        self._send_json(201, status | {"code": 201})

    def _wants_table(self) -> bool:
        return "as=Table" in (self.headers.get("Accept") or "")

    def _object_body(self, rtype, namespace, name, query) -> dict:
        body = self._body()
        if not isinstance(body, dict):
            raise BadRequest("the body of the request was not a JSON object")
        meta = body.get("metadata") or {}
        if body.get("apiVersion") and body["apiVersion"] != rtype.api_version:
            raise BadRequest(
                f"the API version in the data ({body['apiVersion']}) does not match the expected "
                f"API version ({rtype.api_version})"
            )
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise BadRequest(NAMESPACE_MISMATCH)
        if name is not None and meta.get("name") != name:
            raise BadRequest(_name_mismatch(meta.get("name"), name))
        check_structure(rtype, body, strict=query.get("fieldValidation") == "Strict")
        return body

    def _patch(self, rtype, namespace, name, subresource, query, manager, dry_run) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise UnsupportedMediaType(
                content_type, ", ".join(t for t in PATCH_TYPES if PATCH_TYPES[t])
            )
        body = self._body()
        store = self.sim.store
        if patch_type == "apply":
            if not isinstance(body, dict):
                raise BadRequest("apply patches must be objects")
            meta = body.get("metadata") or {}
            if meta.get("name") not in (None, name):
                raise BadRequest(_name_mismatch(meta.get("name"), name))
            if rtype.namespaced and meta.get("namespace") not in (None, namespace):
                raise BadRequest(NAMESPACE_MISMATCH)
            if body.get("apiVersion") != rtype.api_version or body.get("kind") != rtype.kind:
                raise BadRequest(
                    f"invalid object type: {body.get('apiVersion')}, Kind={body.get('kind')}"
                )
            field_manager = query.get("fieldManager")
            if not field_manager:
                raise BadRequest(
                    "PATCH, application/apply-patch+yaml requires fieldManager to be set"
                )
            check_apply_config(rtype, body)
            check_structure(rtype, body)
            existed = _exists(store, rtype, namespace, name)
            if not existed and self._attributes is not None:
                self.sim.auth.authorize_create(self._user, self._attributes)
            result = store.apply(
                rtype.plural,
                namespace,
                name,
                body,
                field_manager=field_manager,
                force=query.get("force") in ("true", "1"),
                subresource=subresource,
                dry_run=dry_run,
            )
            return self._send_json(200 if existed else 201, result)
        result = store.patch(
            rtype.plural,
            namespace,
            name,
            body,
            patch_type,
            subresource=subresource,
            field_manager=manager,
            dry_run=dry_run,
        )
        return self._send_json(200, result)

    # --- watch ---

    def _watch(self, rtype, namespace, query) -> None:
        store = self.sim.store
        timeout = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        send_initial = _watch_options(query)
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true", "True")
        try:
            watcher, initial = store.watch(
                rtype.plural,
                namespace,
                resource_version=query.get("resourceVersion"),
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                send_initial_events=send_initial,
            )
        except Expired as error:  # the watch cache says so in the stream, after a 200
            watcher, initial = None, [("ERROR", error.to_status())]
        self._entry["status"] = 200
        self._log()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        encode = self._watch_encoder(rtype, query.get("includeObject", "Metadata"))
        try:
            for event_type, obj in initial:
                self._chunk(encode(event_type, obj))
            if watcher is None:
                return self._chunk(None)
            if send_initial and bookmarks:
                # The end of the initial events (client-go's WatchList waits for it).
                self._chunk(encode("BOOKMARK", watcher.initial_rv, initial_events_end=True))
            interval = self.sim.bookmark_interval
            next_bookmark = time.monotonic() + interval
            while not self.sim.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    store.bookmark(watcher)
                    next_bookmark = now + interval
                try:
                    wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                    event_type, obj = watcher.queue.get(timeout=max(0.0, min(wait, 0.25)))
                except queue.Empty:  # look at the deadline and stop flag again
                    continue
                self._chunk(encode(event_type, obj))
            self._chunk(None)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            if watcher is not None:
                store.unwatch(watcher)

    def _watch_encoder(self, rtype, include: str):
        """fn(event_type, obj or bookmark resourceVersion) -> the event to send: the
        object as it is, or as a Table when the client asked (the first with the
        column definitions, later ones without, as the apiserver's watch does)."""
        as_table = self._wants_table()
        now = self.sim.clock.now
        headers = [True]

        def encode(event_type, obj, *, initial_events_end=False):
            if event_type == "BOOKMARK":
                meta = {"resourceVersion": obj}
                if initial_events_end:
                    meta["annotations"] = {"k8s.io/initial-events-end": "true"}
                if as_table:
                    obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
                    obj |= {"columnDefinitions": None, "rows": []}
                else:
                    obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
            elif as_table and event_type != "ERROR":
                obj = to_table(
                    rtype.plural, [obj], obj["metadata"]["resourceVersion"], now(), include
                )
                if not headers[0]:
                    obj["columnDefinitions"] = None
                headers[0] = False
            return {"type": event_type, "object": obj}

        return encode

    def _chunk(self, event) -> None:
        if event is None:
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def _dry_run(method: str, query: dict) -> bool:
    """dryRun=All, or nothing; any other value is refused before anything is written."""
    value = query.get("dryRun")
    if value in (None, "All") or method == "GET":
        return value == "All"
    raise Invalid(
        kind=OPTIONS_KIND.get(method, "DeleteOptions"),
        group="meta.k8s.io",
        name="",
        errors=[FieldError("NotSupported", "dryRun", [value], 'supported values: "All"')],
    )


def _watch_options(query: dict) -> bool | None:
    """sendInitialEvents as a bool (None when absent), after the apiserver's checks of
    the watch's list options (a 422 for ListOptions, like ValidateListOptions)."""
    raw = query.get("sendInitialEvents")
    send_initial = None if raw in (None, "") else raw in ("1", "true", "True")
    match = query.get("resourceVersionMatch") or ""
    errors = []
    if send_initial is not None and match != "NotOlderThan":
        errors.append(
            FieldError(
                "Forbidden",
                "resourceVersionMatch",
                detail="sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if match:
        if send_initial is None:
            errors.append(
                FieldError(
                    "Forbidden",
                    "resourceVersionMatch",
                    detail="resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                    "is provided",
                )
            )
        if match != "NotOlderThan":
            errors.append(
                FieldError(
                    "NotSupported",
                    "resourceVersionMatch",
                    match,
                    detail='supported values: "NotOlderThan"',
                )
            )
    if errors:
        raise Invalid(kind="ListOptions", group="meta.k8s.io", name="", errors=errors)
    return send_initial


_NODE_ADMIN = re.compile(r"^/_sim/nodes/([^/]+)/(reclaim|condition|gpus/(\d+)/xid)$")


def _node_admin(sim, path: str, body) -> dict:
    """POST /_sim/nodes/{name}/reclaim | condition | gpus/{index}/xid."""
    match = _NODE_ADMIN.match(path)
    plane = getattr(sim, "control_plane", None)
    if not match or plane is None:
        raise NotFound(message=f"no such admin endpoint: POST {path}")
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    name, action, gpu = match.groups()
    if action == "reclaim":
        unknown = set(body) - {"mode", "grace_seconds", "returns_after_seconds"}
        if unknown:
            raise BadRequest(f"unknown field {sorted(unknown)[0]!r}")
        returns = body.get("returns_after_seconds")
        return plane.spot.reclaim_node(
            name,
            body.get("mode", "eviction"),
            _seconds(body, "grace_seconds", 120),
            None if returns is None else _seconds(body, "returns_after_seconds", 0),
        )
    if action == "condition":
        if body.get("type", "Ready") != "Ready":
            raise BadRequest('type: Unsupported value: only "Ready" can be set')
        status = body.get("status")
        node = plane.kubelet.set_node_ready(
            name, str(status), body.get("reason"), body.get("message")
        )
        return {"node": name, "conditions": node["status"]["conditions"]}
    code = body.get("code")
    if isinstance(code, bool) or not isinstance(code, int) or not 0 < code < 1000:
        raise BadRequest("code: must be an XID number between 1 and 999")
    return plane.xids.inject(name, int(gpu), code)


def deleted_status(rtype, obj: dict) -> dict:
    """The Status the registry's finalizeDelete answers for an object deleted at once
    (no code; `kind` in details is the resource, as upstream sets it)."""
    meta = obj["metadata"]
    details = {"name": meta["name"], "group": rtype.group, "kind": rtype.plural}
    details["uid"] = meta["uid"]
    if not rtype.group:
        del details["group"]  # omitempty
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _seconds(body: dict, field: str, default) -> float:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10**7:
        raise BadRequest(f"{field}: must be a number of seconds between 0 and 10000000")
    return float(value)


def _pod_log(store, namespace: str, name: str, query: dict) -> bytes:
    """GET pods/{name}/log: the apiserver picks the container (validateContainer), a pod
    without a node has an empty log, and the kubelet picks the container's run
    (validateContainerLogStatus): the current one, or with `previous=true` the one in
    lastState, refusing a container that has not started yet or never restarted.
    `tailLines` and then `limitBytes` cut the answer."""
    pod = store.get_ref("pods", namespace, name)
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    container = query.get("container") or ""
    if not container:
        if len(names) != 1:
            raise BadRequest(
                f"a container name must be specified for pod {name}, "
                f"choose one of: [{' '.join(names)}]"
            )
        container = names[0]
    elif container not in names:
        raise BadRequest(f"container {container} is not valid for pod {name}")
    tail = _log_option(name, query, "tailLines", 0, "must be greater than or equal to 0")
    limit = _log_option(name, query, "limitBytes", 1, "must be greater than 0")
    previous = query.get("previous") in ("true", "1", "True")
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    status = next((s for s in statuses if s.get("name") == container), {})
    state = status.get("state") or {}
    log_key = "" if container == names[0] else container
    # A pod without a node: LogLocation has no kubelet to ask, an empty stream (a log
    # handed to a bare kubesim with store.append_log is served all the same).
    if previous and not bound:
        text = ""
    elif previous:
        last = (status.get("lastState") or {}).get("terminated") or {}
        if not last.get("containerID"):
            raise BadRequest(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        # Until a newer container starts, the one in lastState is the latest.
        text = store.read_log(namespace, name, log_key, previous="waiting" not in state)
    else:
        text = store.read_log(namespace, name, log_key)
    if text is None and not bound:
        text = ""
    if text is None:
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise BadRequest(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    if tail is not None:
        text = "".join(text.splitlines(keepends=True)[-tail:]) if tail else ""
    data = text.encode()
    return data[:limit] if limit is not None else data


def _log_option(pod_name: str, query: dict, option: str, least: int, message: str) -> int | None:
    value = query.get(option)
    if value is None:
        return None
    try:
        value = int(value)
    except ValueError:
        raise BadRequest(f"{option}: invalid integer {value!r}") from None
    if value < least:
        raise Invalid(
            kind="PodLogOptions",
            name=pod_name,
            errors=[FieldError("Invalid", option, value, message)],
        )
    return value


def _exists(store, rtype, namespace, name) -> bool:
    try:
        store.get_ref(rtype.plural, namespace, name)
        return True
    except NotFound:
        return False


def _manager_from_agent(agent: str | None) -> str:
    """The apiserver names a manager after the client's user agent, up to the first '/'."""
    return (agent or "unknown").split("/")[0][:128] or "unknown"


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
