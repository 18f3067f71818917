"""Helpers shared by the control-plane tests (K2's files): clients, waiting, manifests."""

import json
import time
import uuid

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import api_client


class Clients:
    def __init__(self, sim):
        self.sim = sim
        self.api = api_client(sim)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)

    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    def advance(self, seconds: float) -> None:
        """Jump the sim clock, as POST /_sim/clock {"advance": N} does."""
        self.sim.clock.advance(seconds)


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.05):
    """Poll until predicate() returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


def condition(obj, kind):
    """A status condition of a client model object by type (None when absent)."""
    return next((c for c in obj.status.conditions or [] if c.type == kind), None)


def running_pod(k, ns, name):
    """Wait until the pod runs; return it."""
    return wait_for(
        lambda: (p := k.core.read_namespaced_pod(name, ns)).status.phase == "Running" and p
    )


def pod_gone(k, ns, name) -> bool:
    try:
        k.core.read_namespaced_pod(name, ns)
    except ApiException as error:
        return error.status == 404
    return False


def error_body(exc) -> dict:
    return json.loads(exc.body)


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pod_spec(
    gpus: int = 0,
    *,
    resource: str = "nvidia.com/gpu",
    restart_policy: str = "Never",
    cpu: str | None = None,
    tolerate: bool = True,
    **extra,
) -> dict:
    limits = {resource: str(gpus)} if gpus else {}
    if cpu:
        limits["cpu"] = cpu
    spec = {
        "restartPolicy": restart_policy,
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": limits}}],
        **extra,
    }
    if tolerate:
        spec["tolerations"] = [GPU_TOLERATION]
    return spec


def pod(name: str, gpus: int = 0, annotations: dict | None = None, **kwargs) -> dict:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": pod_spec(gpus, **kwargs),
    }


def job(name: str, gpus: int = 0, annotations: dict | None = None, spec=None, **kwargs) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": pod_spec(gpus, **kwargs),
            },
            **(spec or {}),
        },
    }
