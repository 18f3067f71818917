"""Manifests and raw HTTP helpers for the API tests."""

import json
import urllib.request


def job_manifest(name="train", *, restart_policy="Never", gpus=None, suspend=None, labels=None):
    container = {"name": "main", "image": "busybox:1.36", "command": ["true"]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec = {"template": {"spec": {"restartPolicy": restart_policy, "containers": [container]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def quota_manifest(name="gpu", hard=None):
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": {"hard": hard or {"requests.nvidia.com/gpu": "4"}},
    }


def status_body(exc) -> dict:
    return json.loads(exc.body)


def sim_request(sim, method, path, body=None):
    """Call kubesim's HTTP API directly (admin endpoints, odd content types)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(sim.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
