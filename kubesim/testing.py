"""kubesim for tests: a running simulator on a free port and clients for it."""

import contextlib
import os
import tempfile
from pathlib import Path

from .app import KubeSim

# kubesim's own tests' cluster: 5 nodes, every kind of GPU node once.
SMALL_CLUSTER = str(Path(__file__).parent / "clusters" / "small.yaml")


@contextlib.contextmanager
def running_kubesim(cluster: str | None = None, speed: float = 1.0, **kwargs):
    """Yield a started KubeSim (cluster installed, kubeconfig at `sim.kubeconfig_path`)."""
    sim = KubeSim.from_cluster_file(cluster, speed=speed, **kwargs)
    sim.start(0)
    directory = tempfile.mkdtemp(prefix="kubesim-")
    sim.write_kubeconfig(os.path.join(directory, "kubeconfig"))
    try:
        yield sim
    finally:
        sim.stop()
        with contextlib.suppress(OSError):
            os.remove(sim.kubeconfig_path)
            os.rmdir(directory)


def api_client(sim: KubeSim):
    """A kubernetes.client.ApiClient talking to `sim` (no retries, short timeouts)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = sim.url
    configuration.retries = 0
    return client.ApiClient(configuration)
