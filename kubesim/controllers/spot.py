"""Spot capacity: reclaims (asked for, or at seeded random moments per pool), the
pods' fate under each reclaim mode, and the replacement nodes a cloud provisions."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from kubesim.apiserver.errors import BadRequest, Conflict
from kubesim.clock import format_time
from kubesim.controllers import nodes as lifecycle
from kubesim.controllers import scheduler
from kubesim.controllers.base import Controller

RECLAIM_MODES = ("eviction", "shutdown")
DEFAULT_RECLAIM_GRACE = 120  # seconds: the notice an AWS spot interruption gives
DEFAULT_REPLACEMENT_AFTER = 300  # seconds until a random reclaim's replacement joins


@dataclass
class Reclaim:
    """A spot node on notice: at `deadline` it is gone (and maybe replaced later)."""

    mode: str
    deadline: datetime
    returns_after: float | None
    node: dict


class SpotReclaimer(Controller):
    def __init__(self, store, recorder, kubelet):
        super().__init__(store, recorder)
        self.kubelet = kubelet  # set_node_ready and disrupt_pod, for the shutdown mode
        self._reclaims: dict[str, Reclaim] = {}  # node name -> its pending reclaim
        self._joins: list[tuple[datetime, dict]] = []  # (when, reclaimed node) replacements
        self.pools: dict[str, dict] = {}  # pool name -> pool with reclaimRatePerHour
        self._next_reclaim: dict[str, datetime | None] = {}
        self._next_reclaim_pool: dict[str, str] = {}
        self._gone: set[str] = set()  # names of reclaimed nodes, never reused
        self._reclaim_history: list[dict] = []
        self._started = self.clock.now()  # random reclaims count from here

    def reclaim_node(
        self,
        name: str,
        mode: str = "eviction",
        grace_seconds: float = DEFAULT_RECLAIM_GRACE,
        returns_after_seconds: float | None = None,
        *,
        at: datetime | None = None,
    ) -> dict:
        """A spot reclaim. eviction: like a cloud interruption handler, cordon the node
        and evict its pods through the Eviction API; shutdown: like graceful node
        shutdown, the node goes NotReady and its pods fail with DisruptionTarget
        (TerminationByKubelet) when the grace period ends. Either way the node is gone
        after `grace_seconds`, and a replacement joins `returns_after_seconds` later."""
        if mode not in RECLAIM_MODES:
            raise BadRequest(
                f'mode: Unsupported value: "{mode}": supported values: "eviction", "shutdown"'
            )
        at = at or self.clock.now()
        with self.store.lock:
            node = self.store.get("nodes", None, name)
            if name in self._reclaims:
                raise Conflict(message=f'node "{name}" is already being reclaimed')
            self._reclaims[name] = Reclaim(
                mode, at + timedelta(seconds=grace_seconds), returns_after_seconds, node
            )
            self._reclaim_history.append(
                {
                    "node": name,
                    "mode": mode,
                    "at": format_time(at),
                    "deadline": format_time(self._reclaims[name].deadline),
                    # Seconds since the control plane started: equal in repeated runs.
                    "after_seconds": round((at - self._started).total_seconds(), 3),
                }
            )
            if mode == "eviction":
                node["spec"]["unschedulable"] = True
                self.store.update("nodes", None, node)
                self._evict_node(name, grace_seconds)
            else:
                self.kubelet.set_node_ready(
                    name, "False", "KubeletNotReady", "node is shutting down"
                )
        self.event(
            node,
            "Warning",
            "SpotInterruption",
            f"Node {name} is being reclaimed ({mode})",
            component="kubesim",
        )
        return {
            "node": name,
            "mode": mode,
            "deadline": format_time(self._reclaims[name].deadline),
            "returns_at": None
            if returns_after_seconds is None
            else format_time(
                self._reclaims[name].deadline + timedelta(seconds=returns_after_seconds)
            ),
        }

    def node_report(self) -> dict:
        """GET /_sim/nodes: reclaims so far, pending ones, replacements to come and the
        next random reclaim of every spot node."""
        with self.store.lock:
            return {
                "now": self.clock.timestamp(),
                "reclaims": list(self._reclaim_history),
                "pending": [
                    {"node": n, "mode": r.mode, "deadline": format_time(r.deadline)}
                    for n, r in sorted(self._reclaims.items())
                ],
                "joins": [
                    {"replaces": node["metadata"]["name"], "at": format_time(when)}
                    for when, node in sorted(self._joins, key=lambda item: item[0])
                ],
                "next_reclaim": {
                    n: format_time(t) for n, t in sorted(self._next_reclaim.items()) if t
                },
            }

    def _evict_node(self, name: str, grace_seconds: float) -> None:
        pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
        for pod in pods:
            if not scheduler.is_active(pod) or pod["metadata"].get("deletionTimestamp"):
                continue
            grace = min(int(grace_seconds), pod["spec"].get("terminationGracePeriodSeconds", 30))
            self._ignore_missing(
                self.store.evict,
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                {"gracePeriodSeconds": grace},
            )

    def advance(self, now) -> None:
        """Reclaim deadlines, replacements joining and random reclaims, one event at a
        time in sim-time order: after a clock jump the outcome (which nodes go, what the
        new ones are called) is the same however the control loop's ticks fell."""
        self._schedule_random_reclaims(self.store.list_refs("nodes")[0])
        while True:
            events = [(r.deadline, 0, name) for name, r in self._reclaims.items()]
            events += [(when, 1, node["metadata"]["name"]) for when, node in self._joins]
            events += [
                (due, 2, name)
                for name, due in self._next_reclaim.items()
                if due is not None and name not in self._reclaims
            ]
            if not events:
                return
            when, kind, name = min(events)
            if when > now:
                return
            if kind == 0:
                self._finish_reclaim(name)
            elif kind == 1:
                self._join_replacement(when, name)
            else:
                pool = self.pools[self._next_reclaim_pool[name]]
                self._next_reclaim[name] = None
                self.reclaim_node(
                    name,
                    pool.get("reclaimMode", "eviction"),
                    float(pool.get("reclaimGraceSeconds", DEFAULT_RECLAIM_GRACE)),
                    pool.get("replacementAfterSeconds", DEFAULT_REPLACEMENT_AFTER),
                    at=when,
                )

    def _finish_reclaim(self, name: str) -> None:
        reclaim = self._reclaims.pop(name)
        self._gone.add(name)
        if reclaim.mode == "shutdown":
            pods, _ = self.store.list_refs("pods", field_selector=f"spec.nodeName={name}")
            for pod in pods:
                if scheduler.is_active(pod):
                    self.kubelet.disrupt_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._ignore_missing(self.store.delete, "nodes", None, name)
        self._next_reclaim.pop(name, None)
        if reclaim.returns_after is not None:
            when = reclaim.deadline + timedelta(seconds=reclaim.returns_after)
            self._joins.append((when, reclaim.node))

    def _join_replacement(self, when: datetime, old_name: str) -> None:
        index = next(
            i
            for i, (moment, node) in enumerate(self._joins)
            if moment == when and node["metadata"]["name"] == old_name
        )
        _, old = self._joins.pop(index)
        taken = {n["metadata"]["name"] for n in self.store.list_refs("nodes")[0]}
        # A new machine gets a new name (and new GPU UUIDs), as Karpenter's would.
        name = lifecycle.replacement_name(old_name, taken | self._gone)
        node = lifecycle.replacement_node(old, name, format_time(when))
        self.store.create("nodes", None, node)
        self._schedule_random_reclaims([node], joined=when)

    def _schedule_random_reclaims(self, nodes: list[dict], joined: datetime | None = None):
        """Spot pools with reclaimRatePerHour lose each node at a seeded random moment."""
        for node in nodes:
            name = node["metadata"]["name"]
            pool_name = (node["metadata"].get("labels") or {}).get("kubesim.io/pool")
            pool = self.pools.get(pool_name)
            if pool is None or name in self._next_reclaim:
                continue
            self._next_reclaim_pool[name] = pool_name
            self._next_reclaim[name] = lifecycle.next_reclaim(
                pool.get("seed", 0),
                name,
                joined or self._started,
                float(pool["reclaimRatePerHour"]),
            )
