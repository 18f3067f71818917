"""The portal's inventory task on the real API server as the cluster grows: 100,
300 and 1,000 KWOK GPU nodes (8 GPUs each), ten pods a node, 500 team namespaces.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \\
      .venv/bin/python bench/inventory_scale.py [--stages 100,300,1000] [--teams 500] \\
      [--pods-per-node 10] [--repeat 3]

DATABASE_URL must name a PostgreSQL database whose name starts with portal_bench
(dropped and re-created). No broker: the task's action runs in this process.
Loopback only; every wait is bounded.

The control plane (controlplane/) starts with the first stage's nodes; each
later stage adds nodes until the count is reached. Each node gets ten pods
bound to it (`spec.nodeName`, as the scheduler would have bound them; KWOK
runs them): eight asking for one GPU each (all 8,000 GPUs held at 1,000
nodes) and two asking for none, spread over the teams' namespaces (each with
the portal's Namespace and ResourceQuota). Then, per stage, `--repeat` times
each and side by side:

1. lists alone: the four LISTs record_inventory makes (Nodes, Pods,
   ResourceQuotas, FailedCreate Events) with the portal's client: the floor;
2. inventory: `cluster.actions.record_inventory()`, what the beat's task runs
   (the LISTs, the pure inventory pass, the database writes);
3. peak memory: the same call once more under tracemalloc (peak of Python
   allocations during the call; tracemalloc slows it, so it is not timed).

Prints one JSON line per stage, then the growth from the first stage to the last.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import realcluster  # noqa: E402
from provision_500 import load_average, say, setup_django  # noqa: E402

PODS_WAIT_SECONDS = 300


def pod(namespace, name, node, gpus):
    """A pod bound to `node`, admissible under Pod Security `restricted`, that KWOK
    keeps running for a day."""
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"kubesim.io/duration": "24h"},
            "labels": {"app": "bench"},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": resources,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                }
            ],
        },
    }


def pods_for(nodes, namespaces, per_node, first):
    made = []
    for n, node in enumerate(nodes):
        for k in range(per_node):
            index = first + n * per_node + k
            namespace = namespaces[index % len(namespaces)]
            made.append(pod(namespace, f"bench-{index:05d}", node, 1 if k < 8 else 0))
    return made


def pending_pods(plane):
    """Whether any pod is still Pending: one call (with a field selector the server
    does not count what remains, so this only asks for one)."""
    listed = plane.get("/api/v1/pods?fieldSelector=status.phase%3DPending&limit=1")
    return bool(listed.get("items"))


def timed(function, repeat):
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - started)
    return seconds


def spread(values):
    return [round(min(values), 3), round(statistics.median(values), 3), round(max(values), 3)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default="100,300,1000")
    parser.add_argument("--teams", type=int, default=500)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stages = [int(n) for n in args.stages.split(",")]
    workdir = tempfile.mkdtemp(prefix="bench-inventory-")
    setup_django(workdir, broker=False)

    from decimal import Decimal

    from django.db import connection

    from cluster import kube
    from cluster.actions import record_inventory
    from cluster.models import Flavor
    from provisioning import manifests
    from teams.models import Team
    from teams.namespaces import namespace_of

    for slug, model in (("h100", "H100-80GB-HBM3"), ("a100", "A100-SXM4-80GB"), ("l4", "L4")):
        Flavor.objects.create(
            slug=slug,
            name=slug.upper(),
            gpu_model=model,
            memory_gb=80,
            resource_name="nvidia.com/gpu",
            node_selector={"nvidia.com/gpu.product": f"NVIDIA-{model}"},
            capacity=0,
            price_per_gpu_hour=Decimal("2.0000"),
        )
    teams = Team.objects.bulk_create(
        Team(slug=f"team-{n:04d}", name=f"Team {n:04d}") for n in range(args.teams)
    )
    namespaces = [namespace_of(team.slug) for team in teams]

    plane = realcluster.start(workdir, stages[0])
    results = []
    try:
        from django.conf import settings

        settings.PORTAL_KUBECONFIG = str(plane.kubeconfig_path)  # what kube.cluster() reads
        client = kube.Cluster(kube.load_configuration(str(plane.kubeconfig_path)), timeout=120)
        say(f"{len(teams)} team namespaces with their quota")
        for team, namespace in zip(teams, namespaces, strict=True):
            client.apply(manifests.namespace(team.slug), field_manager="bench")
            client.apply(
                manifests.resource_quota(namespace, team.slug, {"nvidia.com/gpu": 1000}),
                field_manager="bench",
            )
        nodes_so_far, pods_so_far = [], 0
        for count in stages:
            if count > len(nodes_so_far):
                if nodes_so_far:
                    added = realcluster.add_nodes(
                        plane, workdir, count - len(nodes_so_far), prefix=f"gpu{len(results)}"
                    )
                else:
                    listed = plane.get("/api/v1/nodes")["items"]
                    added = sorted(
                        n["metadata"]["name"]
                        for n in listed
                        if "nvidia.com/gpu" in n["status"]["allocatable"]
                    )
                new_pods = pods_for(added, namespaces, args.pods_per_node, pods_so_far)
                started = time.monotonic()
                realcluster.post_all(
                    plane,
                    lambda body: f"/api/v1/namespaces/{body['metadata']['namespace']}/pods",
                    new_pods,
                )
                nodes_so_far += added
                pods_so_far += len(new_pods)
                say(f"{len(new_pods)} pods made in {time.monotonic() - started:.0f} s")
                deadline = time.monotonic() + PODS_WAIT_SECONDS
                while pending_pods(plane) and time.monotonic() < deadline:
                    time.sleep(3)
            settled = not pending_pods(plane)
            say(f"{len(nodes_so_far)} nodes, {pods_so_far} pods (none Pending: {settled})")

            def lists_alone():
                client.list("Node")
                client.list("Pod")
                client.list("ResourceQuota")
                client.list("Event", field_selector="reason=FailedCreate")

            lists, inventories = [], []
            for _ in range(args.repeat):  # side by side, alternating
                lists += timed(lists_alone, 1)
                inventories += timed(record_inventory, 1)
            tracemalloc.start()
            recorded = record_inventory()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            stage = {
                "nodes": len(nodes_so_far),
                "gpu_nodes_recorded": recorded,
                "pods": pods_so_far,
                "no_pod_pending": settled,
                "database": connection.vendor,
                "lists_alone_seconds_min_median_max": spread(lists),
                "inventory_seconds_min_median_max": spread(inventories),
                "inventory_to_lists_ratio_median": round(
                    statistics.median(inventories) / statistics.median(lists), 2
                ),
                "inventory_peak_mib": round(peak / 2**20, 1),
                "load_average": load_average(),
            }
            results.append(stage)
            print(json.dumps(stage), flush=True)
    finally:
        plane.stop()
    first, last = results[0], results[-1]
    growth = {
        "nodes": f"{first['nodes']} -> {last['nodes']} ({last['nodes'] / first['nodes']:.1f}x)",
        "inventory_time_growth": round(
            last["inventory_seconds_min_median_max"][1]
            / first["inventory_seconds_min_median_max"][1],
            2,
        ),
        "peak_memory_growth": round(last["inventory_peak_mib"] / first["inventory_peak_mib"], 2),
    }
    print(json.dumps(growth))


if __name__ == "__main__":
    main()
