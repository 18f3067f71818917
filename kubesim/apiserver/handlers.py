"""The REST handlers: one function per verb, as in the apiserver's endpoints/handlers
(get, list, watch, create, update, patch, delete, deletecollection), plus the
subresources that answer a verb their own way (pods/log, pods/eviction) and the
SelfSubjectAccessReview, which is answered and never stored.

Each handler takes a `Request` and answers on its connection; `serve` picks the
handler from the tables below them, once the server has authenticated, injected its
faults and routed the URL."""

import queue
import time
from dataclasses import dataclass

from .auth import access_review as review_access
from .errors import (
    BadRequest,
    Expired,
    FieldError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
)
from .listing import list_page
from .resources import ResourceType
from .tables import to_table
from .validation import check_apply_config, check_structure

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": None,
}
OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


@dataclass
class Request:
    """A resource request as the apiserver's RequestInfo names it, with the options
    the verbs share and the connection to answer on."""

    http: object  # the server's Handler: send, send_json, body, headers, stream, chunk
    sim: object
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict
    user: object = None  # who asks and what was authorized, when auth is on
    attributes: object = None
    dry_run: bool = False
    manager: str = ""

    @property
    def store(self):
        return self.sim.store

    def wants_table(self) -> bool:
        return "as=Table" in (self.http.headers.get("Accept") or "")

    def object_body(self) -> dict:
        """The body of a create or update, checked against the URL and the schema."""
        rtype, namespace, name = self.rtype, self.namespace, self.name
        body = self.http.body()
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
        check_structure(rtype, body, strict=self.query.get("fieldValidation") == "Strict")
        return body


# --- the verbs ---


def get(request: Request) -> None:
    obj = request.store.get_ref(request.rtype.plural, request.namespace, request.name)
    if request.wants_table():
        now = request.sim.clock.now()
        return request.http.send_json(
            200,
            to_table(
                request.rtype.plural,
                [obj],
                obj["metadata"]["resourceVersion"],
                now,
                request.query.get("includeObject", "Metadata"),
            ),
        )
    return request.http.send_json(200, obj)


def list_(request: Request) -> None:
    rtype, query = request.rtype, request.query
    objs, list_meta = list_page(request.store, rtype, request.namespace, query)
    if request.wants_table():
        now = request.sim.clock.now()
        table = to_table(
            rtype.plural,
            objs,
            list_meta["resourceVersion"],
            now,
            query.get("includeObject", "Metadata"),
        )
        table["metadata"] = list_meta
        return request.http.send_json(200, table)
    return request.http.send_json(
        200,
        {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": list_meta,
            "items": objs,
        },
    )


def watch(request: Request) -> None:
    """A chunked stream of watch events until timeoutSeconds, the client leaves or the
    server stops; BOOKMARKs when the client allows them."""
    store, query, http = request.store, request.query, request.http
    timeout = float(query.get("timeoutSeconds") or 1800)
    deadline = time.monotonic() + timeout
    send_initial = _watch_options(query)
    bookmarks = query.get("allowWatchBookmarks") in ("1", "true", "True")
    try:
        watcher, initial = store.watch(
            request.rtype.plural,
            request.namespace,
            resource_version=query.get("resourceVersion"),
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            send_initial_events=send_initial,
        )
    except Expired as error:  # the watch cache says so in the stream, after a 200
        watcher, initial = None, [("ERROR", error.to_status())]
    http.stream()
    encode = _watch_encoder(request, query.get("includeObject", "Metadata"))
    try:
        for event_type, obj in initial:
            http.chunk(encode(event_type, obj))
        if watcher is None:
            return http.chunk(None)
        if send_initial and bookmarks:
            # The end of the initial events (client-go's WatchList waits for it).
            http.chunk(encode("BOOKMARK", watcher.initial_rv, initial_events_end=True))
        interval = request.sim.bookmark_interval
        next_bookmark = time.monotonic() + interval
        while not request.sim.stopping.is_set():
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
            http.chunk(encode(event_type, obj))
        http.chunk(None)
    except (BrokenPipeError, ConnectionResetError):
        http.close_connection = True
    finally:
        if watcher is not None:
            store.unwatch(watcher)


def create(request: Request) -> None:
    body = request.object_body()
    created = request.store.create(
        request.rtype.plural,
        request.namespace,
        body,
        dry_run=request.dry_run,
        field_manager=request.manager,
    )
    return request.http.send_json(201, created)


def update(request: Request) -> None:
    body = request.object_body()
    updated = request.store.update(
        request.rtype.plural,
        request.namespace,
        body,
        subresource=request.subresource,
        dry_run=request.dry_run,
        field_manager=request.manager,
    )
    return request.http.send_json(200, updated)


def patch(request: Request) -> None:
    rtype, namespace, name, query = request.rtype, request.namespace, request.name, request.query
    content_type = (request.http.headers.get("Content-Type") or "").split(";")[0].strip()
    patch_type = PATCH_TYPES.get(content_type)
    if patch_type is None:
        raise UnsupportedMediaType(
            content_type, ", ".join(t for t in PATCH_TYPES if PATCH_TYPES[t])
        )
    body = request.http.body()
    store = request.store
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
            raise BadRequest("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        check_apply_config(rtype, body)
        check_structure(rtype, body)
        existed = _exists(store, rtype, namespace, name)
        if not existed and request.attributes is not None:
            request.sim.auth.authorize_create(request.user, request.attributes)
        result = store.apply(
            rtype.plural,
            namespace,
            name,
            body,
            field_manager=field_manager,
            force=query.get("force") in ("true", "1"),
            subresource=request.subresource,
            dry_run=request.dry_run,
        )
        return request.http.send_json(200 if existed else 201, result)
    result = store.patch(
        rtype.plural,
        namespace,
        name,
        body,
        patch_type,
        subresource=request.subresource,
        field_manager=request.manager,
        dry_run=request.dry_run,
    )
    return request.http.send_json(200, result)


def delete(request: Request) -> None:
    rtype, options = request.rtype, request.http.body() or {}
    deleted = request.store.delete(
        rtype.plural,
        request.namespace,
        request.name,
        propagation_policy=_propagation_policy(request.query, options),
        dry_run=request.dry_run,
        preconditions=options.get("preconditions"),
        grace_period_seconds=_grace_period(request.query, options),
    )
    if rtype.returns_deleted_object or deleted["metadata"].get("finalizers"):
        return request.http.send_json(200, deleted)  # marked, not gone yet
    return request.http.send_json(200, deleted_status(rtype, deleted))


def delete_collection(request: Request) -> None:
    rtype, query, options = request.rtype, request.query, request.http.body() or {}
    deleted = request.store.delete_collection(
        rtype.plural,
        request.namespace,
        label_selector=query.get("labelSelector"),
        field_selector=query.get("fieldSelector"),
        propagation_policy=_propagation_policy(query, options),
        grace_period_seconds=_grace_period(query, options),
    )
    return request.http.send_json(
        200,
        {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": request.store.resource_version},
            "items": deleted,
        },
    )


# --- subresources, and the review answered without storage ---


def pod_log(request: Request) -> None:
    """GET pods/{name}/log: the apiserver picks the container (validateContainer), a pod
    without a node has an empty log, and the kubelet picks the container's run
    (validateContainerLogStatus): the current one, or with `previous=true` the one in
    lastState, refusing a container that has not started yet or never restarted.
    `tailLines` and then `limitBytes` cut the answer."""
    store, namespace, name, query = request.store, request.namespace, request.name, request.query
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
    request.http.send(200, data[:limit] if limit is not None else data, "text/plain")


def evict(request: Request) -> None:
    """policy/v1 Eviction: no PodDisruptionBudgets exist here, so it is always allowed."""
    body = request.http.body()
    if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
        raise BadRequest("the body of the request was not a policy/v1 Eviction")
    if (body.get("metadata") or {}).get("name") != request.name:
        raise BadRequest("name in URL does not match name in Eviction object")
    request.store.evict(request.namespace, request.name, body.get("deleteOptions"))
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    request.http.send_json(201, status | {"code": 201})


def access_review(request: Request) -> None:
    """POST selfsubjectaccessreviews (`kubectl auth can-i`): answered, never stored."""
    review = request.object_body()
    request.http.send_json(201, review_access(request.sim.auth, request.user, review))


VERB_HANDLERS = {
    "get": get,
    "list": list_,
    "watch": watch,
    "create": create,
    "update": update,
    "patch": patch,
    "delete": delete,
    "deletecollection": delete_collection,
}
SUBRESOURCE_HANDLERS = {("get", "log"): pod_log, ("create", "eviction"): evict}
# Kinds answered without storage, and the one verb each takes (on the collection).
ANSWERED = {"selfsubjectaccessreviews": ("create", access_review)}
NAMED_VERBS = {"update", "patch"}  # only on an object's own URL
COLLECTION_VERBS = {"create"}  # only on the collection's URL


def serve(request: Request, method: str, verb: str) -> None:
    """Answer with the handler of `verb`: 405 for a verb the kind or the URL's shape does
    not allow, 422 for a dryRun other than All (before anything is written)."""
    rtype, name = request.rtype, request.name
    if rtype.read_only and method != "GET":
        raise MethodNotAllowed()
    if rtype.plural in ANSWERED:
        answered_verb, handler = ANSWERED[rtype.plural]
        if verb != answered_verb or name:
            raise MethodNotAllowed()
        return handler(request)
    request.dry_run = dry_run(method, request.query)
    agent = request.http.headers.get("User-Agent")
    request.manager = request.query.get("fieldManager") or manager_from_agent(agent)
    handler = SUBRESOURCE_HANDLERS.get((verb, request.subresource))
    if handler is None:
        if (verb in NAMED_VERBS and name is None) or (verb in COLLECTION_VERBS and name):
            raise MethodNotAllowed()
        handler = VERB_HANDLERS[verb]
    return handler(request)


# --- options ---


def dry_run(method: str, query: dict) -> bool:
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


def manager_from_agent(agent: str | None) -> str:
    """The apiserver names a manager after the client's user agent, up to the first '/'."""
    return (agent or "unknown").split("/")[0][:128] or "unknown"


def _propagation_policy(query: dict, options: dict) -> str | None:
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    orphan = query.get("orphanDependents") or options.get("orphanDependents")
    if policy is None and orphan in (True, "true"):
        policy = "Orphan"
    return policy


def _grace_period(query: dict, options: dict):
    return query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))


def _watch_encoder(request: Request, include: str):
    """fn(event_type, obj or bookmark resourceVersion) -> the event to send: the
    object as it is, or as a Table when the client asked (the first with the
    column definitions, later ones without, as the apiserver's watch does)."""
    as_table = request.wants_table()
    now = request.sim.clock.now
    rtype = request.rtype
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
            obj = to_table(rtype.plural, [obj], obj["metadata"]["resourceVersion"], now(), include)
            if not headers[0]:
                obj["columnDefinitions"] = None
            headers[0] = False
        return {"type": event_type, "object": obj}

    return encode


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


def _name_mismatch(body_name, url_name) -> str:
    return f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
