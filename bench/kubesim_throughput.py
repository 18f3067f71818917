"""Raw request throughput of kubesim through the official client.

Starts kubesim in a subprocess (so client and server don't share a GIL), then for
1, 4 and 8 client threads measures creates, gets and lists of Jobs per second.

    .venv/bin/python bench/kubesim_throughput.py [--requests 400] [--full] [--baseline DIR]

--full runs the demo cluster's control plane too (suspended Jobs, so it has little
to do); the default is the bare API server. --baseline DIR also starts the kubesim of
another checkout (e.g. `git worktree add /tmp/main main`) and measures every cell
against both servers, alternating, so the printed ratios compare them side by side
on the same machine load.
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time

from kubernetes import client


def start_server(full: bool, source: str | None = None):
    """kubesim in a subprocess, from this checkout or the one in `source`."""
    command = [sys.executable, "-m", "kubesim", "--port", "0"]
    if not full:
        command.append("--bare")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=source)
    line = process.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    if not match:
        process.kill()
        raise SystemExit(f"kubesim did not start: {line!r}")
    return process, match.group(0)


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def job(name: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"bench": "1"}},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                }
            },
        },
    }


def run_phase(url: str, threads: int, total: int, work) -> float:
    """Requests per second for `total` calls of work(batch_api, index) over `threads`."""
    per_thread = total // threads
    apis = []
    for _ in range(threads):
        configuration = client.Configuration()
        configuration.host = url
        apis.append(client.BatchV1Api(client.ApiClient(configuration)))
    barrier = threading.Barrier(threads + 1)

    def worker(number: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            work(apis[number], number * per_thread + i)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    return per_thread * threads / elapsed


def measure(url: str, requests: int) -> tuple[list, float]:
    """[(threads, create/s, get/s, list/s)] and full lists/s against one server."""
    configuration = client.Configuration()
    configuration.host = url
    core = client.CoreV1Api(client.ApiClient(configuration))
    rows = []
    for threads in (1, 4, 8):
        namespace = f"bench-{threads}"
        core.create_namespace({"metadata": {"name": namespace}})

        def create(api, i, namespace=namespace):
            api.create_namespaced_job(namespace, job(f"job-{i}"))

        def get(api, i, namespace=namespace):
            api.read_namespaced_job(f"job-{i}", namespace)

        def list_some(api, i, namespace=namespace):
            # A selective list, as a controller's sync does: 1 of N jobs matches.
            api.list_namespaced_job(namespace, field_selector=f"metadata.name=job-{i}")

        rows.append(
            (
                threads,
                run_phase(url, threads, requests, create),
                run_phase(url, threads, requests, get),
                run_phase(url, threads, requests, list_some),
            )
        )
    full_list = run_phase(url, 1, 100, lambda api, i: api.list_namespaced_job("bench-1"))
    return rows, full_list


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400, help="requests per phase")
    parser.add_argument("--full", action="store_true", help="run the control plane too")
    parser.add_argument("--baseline", help="another checkout to compare against")
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --baseline")
    args = parser.parse_args()
    mode = "demo cluster + control plane" if args.full else "bare API server"
    if not args.baseline:
        process, url = start_server(args.full)
        try:
            rows, full_list = measure(url, args.requests)
        finally:
            process.terminate()
            process.wait(timeout=10)
        print(f"kubesim raw throughput ({mode}; {args.requests} requests per cell), requests/s")
        print(f"{'threads':>8} {'create':>8} {'get':>8} {'list':>8}")
        for threads, create_rate, get_rate, list_rate in rows:
            print(f"{threads:>8} {create_rate:>8.0f} {get_rate:>8.0f} {list_rate:>8.0f}")
        print(f"full list of {args.requests} jobs, 1 thread: {full_list:.0f}/s")
        return

    # Side by side: this checkout and the baseline in alternating rounds, fresh servers
    # each round; the best round of each counts (the least disturbed by other load).
    results: dict[str, list] = {"this": [], "baseline": []}
    cpu: dict[str, list] = {"this": [], "baseline": []}  # server CPU seconds per round
    for round_number in range(args.rounds):
        order = ("this", "baseline") if round_number % 2 == 0 else ("baseline", "this")
        for which in order:
            process, url = start_server(args.full, args.baseline if which == "baseline" else None)
            try:
                before = server_cpu(process.pid)
                results[which].append(measure(url, args.requests))
                cpu[which].append(server_cpu(process.pid) - before)
            finally:
                process.terminate()
                process.wait(timeout=10)

    def best(which: str):
        runs = results[which]
        rows = [
            (runs[0][0][i][0], *(max(run[0][i][k] for run in runs) for k in (1, 2, 3)))
            for i in range(len(runs[0][0]))
        ]
        return rows, max(run[1] for run in runs)

    (this_rows, this_full), (base_rows, base_full) = best("this"), best("baseline")
    print(
        f"kubesim raw throughput ({mode}; {args.requests} requests per cell, best of "
        f"{args.rounds} alternating rounds), requests/s: this checkout / baseline = ratio"
    )
    print(f"{'threads':>8} {'create':>22} {'get':>22} {'list':>22}")
    for mine, base in zip(this_rows, base_rows, strict=True):
        pairs = zip(mine[1:], base[1:], strict=True)
        cells = [f"{m:>6.0f} / {b:>5.0f} = {m / b:4.2f}" for m, b in pairs]
        print(f"{mine[0]:>8} " + " ".join(f"{c:>22}" for c in cells))
    print(
        f"full list of {args.requests} jobs, 1 thread: {this_full:.0f} / {base_full:.0f} = "
        f"{this_full / base_full:.2f}"
    )
    # CPU the server spent on the same requests: far less disturbed by other load than
    # wall-clock rates (lower is better; the least of the rounds counts).
    this_cpu, base_cpu = min(cpu["this"]), min(cpu["baseline"])
    print(
        f"server CPU for all cells: {this_cpu:.2f} s / {base_cpu:.2f} s = {this_cpu / base_cpu:.2f}"
    )


if __name__ == "__main__":
    main()
