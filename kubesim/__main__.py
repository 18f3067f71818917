"""python -m kubesim --cluster FILE --port N [--state FILE] [--speed X] [--kubeconfig PATH]
python -m kubesim history --cluster FILE --workload FILE --from T --to T --out FILE [--step S]"""

import argparse
import signal
import sys

from kubesim.exporters import ksm

from .app import KubeSim
from .cluster import DEFAULT_CLUSTER


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["history"]:
        from .history.cli import main as history_main

        return history_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, help="cluster file (YAML)")
    parser.add_argument("--port", type=int, default=8001, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state", help="load state from this file at start, save it on exit")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per real second"
    )
    parser.add_argument("--kubeconfig", help="write a kubeconfig for clients here")
    parser.add_argument(
        "--bare", action="store_true", help="API server only: no nodes, controllers or quota"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with a certificate authority made at start-up (in the --kubeconfig)",
    )
    parser.add_argument(
        "--token-auth-file",
        metavar="PATH",
        help='authenticate bearer tokens from this CSV (token,user,uid,"group1,group2") and '
        "authorize requests by RBAC; the --kubeconfig written is a cluster admin's",
    )
    parser.add_argument(
        "--dcgm-file-sd",
        metavar="PATH",
        help="keep a Prometheus file_sd JSON of the per-node DCGM targets at PATH",
    )
    parser.add_argument(
        "--metric-labels-allowlist",
        metavar="LIST",
        help="kube-state-metrics' allowlist, e.g. 'pods=[gpu-portal.io/team],nodes=[*]' "
        "(default: the portal's labels and GPU Feature Discovery's)",
    )
    args = parser.parse_args(argv)
    allowlist = None
    if args.metric_labels_allowlist is not None:
        try:
            allowlist = ksm.parse_allowlist(args.metric_labels_allowlist)
        except ValueError as exc:
            parser.error(str(exc))
    if args.bare and (args.dcgm_file_sd or allowlist is not None):
        parser.error("--dcgm-file-sd and --metric-labels-allowlist need the control plane")

    sim = KubeSim.from_cluster_file(
        args.cluster, speed=args.speed, state=args.state, control_plane=not args.bare
    )
    if args.tls:
        sim.enable_tls()
    if args.token_auth_file:
        try:
            sim.enable_auth(args.token_auth_file)
        except (OSError, ValueError) as exc:
            parser.error(f"--token-auth-file: {exc}")
    # SIGTERM exits through the same path as Ctrl-C so the state gets saved.
    signal.signal(signal.SIGTERM, _interrupt)
    sim.start(args.port, args.host)
    if allowlist is not None:
        sim.control_plane.exporters.ksm_allowlist = allowlist
    if args.dcgm_file_sd:
        # Listening on every address: the targets name the loopback one.
        host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        sim.control_plane.exporters.keep_file_sd(args.dcgm_file_sd, f"{host}:{sim.port}")
    if args.kubeconfig:
        sim.write_kubeconfig(args.kubeconfig)
    print(f"kubesim listening on {sim.url}", flush=True)
    if args.kubeconfig:
        print(f"kubeconfig written to {args.kubeconfig}", flush=True)
    try:
        sim.stopping.wait()
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        if args.state:
            sim.save_state(args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
