"""The admin API under /_sim/ (JSON, never subject to faults): the request log, faults,
the clock, the state, compaction, and the nodes' reclaims, conditions and XIDs."""

import re

from ..clock import format_time
from .errors import BadRequest, NotFound


def answer(sim, method: str, path: str, body) -> dict:
    """The JSON of a 200, or an ApiError."""
    if path == "/_sim/requests":
        if method == "DELETE":
            sim.request_log.clear()
        return {"items": list(sim.request_log)}
    if path == "/_sim/faults":
        if method in ("PUT", "POST"):
            try:
                sim.faults.set(**body)
            except (TypeError, ValueError) as exc:
                raise BadRequest(str(exc)) from None
        elif method == "DELETE":
            sim.faults.clear()
        return sim.faults.get()
    if path == "/_sim/clock":
        if method == "POST":
            if "speed" in body:
                sim.clock.set_speed(float(body["speed"]))
            if "advance" in body:
                sim.clock.advance(float(body["advance"]))
        now = sim.clock.now()
        # `now` at Kubernetes' second precision; `unix` to the microsecond, so two
        # processes reading a moment apart never see the clock go back.
        return {"now": format_time(now), "unix": now.timestamp(), "speed": sim.clock.speed}
    if path == "/_sim/state" and method == "GET":
        return sim.store.dump()
    if path == "/_sim/compact" and method == "POST":
        sim.store.compact()
        return {"resourceVersion": sim.store.resource_version}
    if path == "/_sim/nodes" and method == "GET" and getattr(sim, "control_plane", None):
        return sim.control_plane.spot.node_report()
    if path.startswith("/_sim/nodes/") and method == "POST":
        return _node_admin(sim, path, body)
    raise NotFound(message=f"no such admin endpoint: {method} {path}")


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


def _seconds(body: dict, field: str, default) -> float:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10**7:
        raise BadRequest(f"{field}: must be a number of seconds between 0 and 10000000")
    return float(value)
