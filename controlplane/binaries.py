"""Where `make cluster-binaries` puts the control plane's programs, and what to
say when they are not there."""

import os
import shutil
from pathlib import Path

NAMES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kube-state-metrics",
)


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "gpu-portal" / "cluster"
    return Path(os.environ.get("PORTAL_CLUSTER_CACHE") or default)


def binary(name: str) -> str:
    return str(cache_dir() / "bin" / name)


def missing() -> str:
    """'' when every binary is built; else what is missing and how to get it."""
    absent = [name for name in NAMES if not os.access(binary(name), os.X_OK)]
    if not absent:
        return ""
    how = (
        "run `make cluster-binaries` (builds them from the Go module proxy, about 20 minutes "
        "cold on 2 cores)"
        if shutil.which("go")
        else "install Go 1.26 or newer, then run `make cluster-binaries`"
    )
    return (
        f"the real control plane is not built ({', '.join(absent)} missing in {cache_dir()}): {how}"
    )
