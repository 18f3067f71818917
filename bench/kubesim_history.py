"""Throughput of `python -m kubesim history` at billing scale.

200 team namespaces x 4 flavors (H100, A100 80GB, L4, A100 MIG 1g.10gb), each team
running one 8-hour Job a day on each flavor for DAYS days, on a cluster sized for it
(100 GPU nodes, 824 devices). Prints the wall time, samples written, samples per
second, CPU time, output size and the peak RSS of the generator process.

    .venv/bin/python bench/kubesim_history.py [--days 180] [--step 1h] [--metrics REGEX]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import yaml

FLAVORS = [
    (
        "h100",
        {"model": "H100-80GB-HBM3", "count": 8},
        25,
        "nvidia.com/gpu",
        "NVIDIA-H100-80GB-HBM3",
    ),
    (
        "a100",
        {"model": "A100-SXM4-80GB", "count": 8},
        25,
        "nvidia.com/gpu",
        "NVIDIA-A100-SXM4-80GB",
    ),
    ("l4", {"model": "L4", "count": 8}, 25, "nvidia.com/gpu", "NVIDIA-L4"),
    (
        "mig",
        {
            "model": "A100-SXM4-80GB",
            "count": 8,
            "mig": {"strategy": "mixed", "config": "all-1g.10gb"},
        },
        4,
        "nvidia.com/mig-1g.10gb",
        None,
    ),
]
PROFILES = [
    {"profile": "constant", "util": 70},
    {"profile": "idle-after", "util": 90, "idleAfter": "3h"},
    {"profile": "daily", "util": 80, "busyHours": "09:00-17:00"},
    {"profile": "busy"},
]


def files(directory: str, days: int, teams: int) -> tuple[str, str]:
    pools = [
        {
            "name": name,
            "namePrefix": f"gpu-{name}",
            "count": count,
            "cpu": "96",
            "memory": "1000Gi",
            "gpu": gpu,
        }
        for name, gpu, count, _, _ in FLAVORS
    ]
    namespaces, workloads = [], []
    for team in range(teams):
        ns = f"team-{team:03d}"
        namespaces.append(
            {"name": ns, "team": f"t{team:03d}", "quota": {"requests.nvidia.com/gpu": "8"}}
        )
        for index, (flavor, _, _, resource_name, product) in enumerate(FLAVORS):
            entry = {
                "namespace": ns,
                "name": f"{flavor}-daily",
                "kind": "Job",
                "resource": resource_name,
                "gpus": 1,
                "start": f"+{6 * 60 + team % 120}m",
                "duration": "8h",
                "repeat": {"every": "1d", "count": days},
                **PROFILES[(team + index) % len(PROFILES)],
            }
            if product:
                entry["nodeSelector"] = {"nvidia.com/gpu.product": product}
            workloads.append(entry)
    cluster_path = os.path.join(directory, "cluster.yaml")
    workload_path = os.path.join(directory, "workload.yaml")
    with open(cluster_path, "w") as handle:
        yaml.safe_dump({"name": "bench", "nodePools": pools}, handle)
    with open(workload_path, "w") as handle:
        yaml.safe_dump({"namespaces": namespaces, "workloads": workloads}, handle)
    return cluster_path, workload_path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--step", default="1h")
    parser.add_argument("--metrics", help="only these families (regex)")
    parser.add_argument("--keep", help="directory to keep the output in")
    args = parser.parse_args()
    directory = args.keep or tempfile.mkdtemp(prefix="kubesim-history-bench-")
    os.makedirs(directory, exist_ok=True)
    cluster_path, workload_path = files(directory, args.days, args.teams)
    out = os.path.join(directory, "history.om")
    command = [
        sys.executable, "-m", "kubesim", "history", "--cluster", cluster_path,
        "--workload", workload_path, "--from", "2026-01-01T00:00:00Z",
        "--to", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + args.days * 86400)),
        "--out", out, "--step", args.step, "--answer", os.path.join(directory, "answer.csv"),
    ]  # fmt: skip
    if args.metrics:
        command += ["--metrics", args.metrics]
    began = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.monotonic() - began
    if result.returncode:
        raise SystemExit(result.stderr)
    summary = json.loads(result.stdout)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_mib = usage.ru_maxrss / 1024
    cpu = usage.ru_utime + usage.ru_stime  # less sensitive than wall time to a busy machine
    size = os.path.getsize(out)
    print(
        f"{args.teams} namespaces x 4 flavors x {args.days} days, step {args.step}"
        f"{', metrics ' + args.metrics if args.metrics else ''}: {elapsed:.1f} s, "
        f"CPU {cpu:.1f} s, {summary['samples']:,} samples ({summary['samples'] / elapsed:,.0f}/s), "
        f"{size / 2**30:.2f} GiB, {summary['answer_rows']:,} answer rows, "
        f"peak RSS {peak_mib:.0f} MiB"
    )
    if not args.keep:
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)


if __name__ == "__main__":
    main()
