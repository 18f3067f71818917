"""`make cluster`: the real control plane on loopback, in the foreground until
Ctrl-C (or SIGTERM), as `make demo` runs the portal.

    python -m controlplane [--port 6443] [--cluster kubesim/clusters/demo.yaml]

It writes an admin's kubeconfig to $PORTAL_VAR_DIR/cluster/kubeconfig (var/
by default) and listens on $CLUSTER_PORT (6443)."""

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from controlplane.runner import ControlPlane, ControlPlaneError

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controlplane", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("CLUSTER_PORT") or 6443))
    parser.add_argument("--cluster", help="a kubesim cluster file (default: the demo cluster)")
    parser.add_argument("--dir", help="where it writes (default: $PORTAL_VAR_DIR/cluster)")
    parser.add_argument(
        "--ksm-port", type=int, default=0, help="kube-state-metrics (default: free)"
    )
    parser.add_argument(
        "--dcgm-port", type=int, default=0, help="DCGM exporter pages (default: free)"
    )
    parser.add_argument(
        "--dra",
        action="store_true",
        help="build the cluster file's draPools: GPUs published in ResourceSlices",
    )
    parser.add_argument("--ready-file", help="written (with the ports, as JSON) once it is up")
    args = parser.parse_args(argv)
    directory = Path(args.dir or Path(os.environ.get("PORTAL_VAR_DIR") or ROOT / "var") / "cluster")
    plane = ControlPlane(
        directory,
        port=args.port,
        cluster_file=args.cluster,
        ksm_port=args.ksm_port,
        dcgm_port=args.dcgm_port,
        dra=args.dra,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        plane.start()
    except ControlPlaneError as exc:
        print(f"make cluster: {exc}", file=sys.stderr)
        return 1
    print(f"kubeconfig: {plane.kubeconfig_path}")
    print(f"  kubectl --kubeconfig {plane.kubeconfig_path} get nodes")
    print(f"kube-state-metrics: http://127.0.0.1:{plane.ksm_port}/metrics")
    print(f"DCGM exporter pages: http://127.0.0.1:{plane.dcgm_port}/targets")
    print(f"logs: {directory / 'logs'}; Ctrl-C stops it", flush=True)
    if args.ready_file:
        ports = {"api": plane.port, "kube_state_metrics": plane.ksm_port, "dcgm": plane.dcgm_port}
        Path(args.ready_file).write_text(json.dumps(ports))
    try:
        while not stop.wait(1.0):
            dead = [name for name, p in plane.processes.items() if p.poll() is not None]
            if dead:
                print(
                    f"make cluster: {dead[0]} exited; its log: {plane.processes[dead[0]].log_path}",
                    file=sys.stderr,
                )
                return 1
        return 0
    finally:
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
