"""The real control plane (controlplane/) at bench scale, shared by the benches
that take `--backend kubernetes`.

- `cluster_file(path, nodes)`: a kubesim cluster file of `nodes` 8-GPU nodes
  (H100, A100 and L4 pools in turn), written on the fly. Pools hold at most 250
  nodes: kubesim gives a node the pod CIDR 10.244.<index in its pool>.0/24,
  which the API server refuses past 255.
- `start(workdir, nodes)`: the control plane with those nodes as KWOK nodes,
  Ready, on loopback (every component bound to 127.0.0.1).
- `AuditLog`: the API server's audit log read as kubesim's request log (the
  admin's requests since a mark), so a bench counts API calls on both backends.
- `cpu_seconds(pids)`: user + system CPU of processes, from /proc.
"""

import http.client
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POOL_SIZE = 250
# KWOK renews 1,000 leases four at a time (controlplane/kwok.yaml); on a loaded
# 2-core machine that is ~20 a second, so with the runner's 20 s grace the node
# lifecycle controller keeps marking nodes NotReady and KWOK re-initializing
# them (at 1,000 nodes, 460 were still not Ready after 600 s). A bench run is
# shorter than this grace: a node stays Ready once KWOK made it so.
NODE_MONITOR_GRACE_SECONDS = 1800
MODELS = ("H100-80GB-HBM3", "A100-SXM4-80GB", "L4")
ADMIN = "kubernetes-admin"  # controlplane.runner.ADMIN: the kubeconfig every bench side uses


def pools(nodes, *, prefix="gpu", first_model=0):
    """Pools of at most POOL_SIZE 8-GPU nodes adding up to `nodes`, models in turn."""
    made, index = [], 0
    while nodes > 0:
        count = min(POOL_SIZE, nodes)
        model = MODELS[(first_model + index) % len(MODELS)]
        short = model.split("-")[0].lower()
        made.append(
            {
                "name": f"{prefix}-{short}-{index}",
                "namePrefix": f"{prefix}-{short}-{index}",
                "count": count,
                "instanceType": "bench.8gpu",
                "cpu": "192",
                "memory": "2000Gi",
                "pods": 110,
                "gpu": {"model": model, "count": 8},
            }
        )
        nodes -= count
        index += 1
    return made


def cluster_file(path, nodes, *, prefix="gpu"):
    data = {
        "name": f"bench-{nodes}",
        "kubeletVersion": "v1.37.2",
        "zones": ["sim-a", "sim-b"],
        "nodePools": pools(nodes, prefix=prefix),
    }
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def say(text):
    print(text, file=sys.stderr, flush=True)


def start(workdir, nodes):
    """The control plane with `nodes` KWOK GPU nodes, all Ready; the caller stops it.

    The runner starts with one CPU node, then the GPU nodes are added here:
    its own start-up posts nodes one connection each and polls the full node
    list every 0.1 s for 120 s at most, which at 1,000 nodes on a loaded
    2-core machine (5 MB a list) starves the API server and times out."""
    from controlplane.runner import ControlPlane

    seed = Path(workdir) / "cluster-seed.yaml"
    seed.write_text(
        yaml.safe_dump(
            {"name": "seed", "nodePools": [{"name": "system", "namePrefix": "cpu", "count": 1}]}
        )
    )
    plane = ControlPlane(
        Path(workdir) / "controlplane",
        cluster_file=seed,
        node_monitor_grace_seconds=NODE_MONITOR_GRACE_SECONDS,
        log=say,
    )
    plane.start()
    try:
        add_nodes(plane, workdir, nodes)
    except BaseException:
        plane.stop()
        raise
    return plane


def add_nodes(plane, workdir, nodes, *, prefix="gpu", timeout=600):
    """`nodes` more KWOK GPU nodes named `prefix`-..., waited for until Ready."""
    from controlplane import nodes as kwok

    path = cluster_file(Path(workdir) / f"cluster-{prefix}-{nodes}.yaml", nodes, prefix=prefix)
    made = kwok.kwok_nodes(path, kubelet_port=plane.kwok_port)
    started = time.monotonic()
    post_all(plane, "/api/v1/nodes", made)
    names = {node["metadata"]["name"] for node in made}
    while True:
        listed = plane.get("/api/v1/nodes")["items"]
        waiting = names - {n["metadata"]["name"] for n in listed if kwok.is_ready(n)}
        if not waiting:
            break
        if time.monotonic() - started > timeout:
            raise SystemExit(f"{len(waiting)} of {nodes} nodes not Ready after {timeout} s")
        time.sleep(2)
    say(f"{nodes} KWOK nodes Ready in {time.monotonic() - started:.0f} s")
    return sorted(names)


def post_all(plane, path_of, bodies, *, threads=4):
    """POST every body (to `path_of(body)`, or a fixed path) as the admin, `threads`
    keep-alive connections; a 409 (already there) is fine."""
    path_for = path_of if callable(path_of) else (lambda _body: path_of)
    chunks = [bodies[n::threads] for n in range(threads)]

    def post(chunk):
        connection = http.client.HTTPSConnection(
            "127.0.0.1", plane.port, context=plane._context(), timeout=60
        )
        try:
            for body in chunk:
                connection.request(
                    "POST",
                    path_for(body),
                    json.dumps(body),
                    {"Content-Type": "application/json"},
                )
                response = connection.getresponse()
                text = response.read()
                if response.status not in (200, 201, 409):
                    raise RuntimeError(f"POST {path_for(body)}: {response.status} {text[:300]}")
        finally:
            connection.close()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(post, chunks))


def server_pids(plane, names=("kube-apiserver", "etcd")):
    return [plane.processes[name].pid for name in names]


def cpu_seconds(pids):
    """User + system CPU seconds of `pids` so far (0 for one that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def load_average():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class AuditLog:
    """The admin's requests the API server logged since `mark()`, as
    {"method", "path", "status"} (the audit policy logs one line per request)."""

    def __init__(self, plane):
        self.path = Path(plane.audit_log)
        self.offset = 0

    def mark(self):
        self.offset = self.path.stat().st_size

    def requests(self, user=ADMIN):
        from controlplane.runner import METHOD_OF_VERB

        with open(self.path, "rb") as log:
            log.seek(self.offset)
            lines = log.read().splitlines()
        found = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            if (event.get("user") or {}).get("username") != user:
                continue
            found.append(
                {
                    "method": METHOD_OF_VERB.get(event["verb"], event["verb"].upper()),
                    "path": event["requestURI"].split("?")[0],
                    "status": (event.get("responseStatus") or {}).get("code", 0),
                }
            )
        return found
