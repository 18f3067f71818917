"""`python -m kubesim history`: the options, and `generate`, which runs a playback
into its output files."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time

import yaml

from kubesim import cluster
from kubesim.clock import format_time
from kubesim.exporters import dcgm, ksm

from .objects import object_uid
from .output import CsvAnswer, JsonAnswer, SplitSpools, Spools
from .playback import BUSY_METRIC, History
from .workload import HistoryError, as_datetime, load_workload, parse_moment, parse_seconds


def generate(
    *,
    cluster_path: str,
    workload_path: str,
    start: float,
    end: float,
    out: str,
    step: float = 60.0,
    answer_path: str | None = None,
    threshold: float | None = None,
    metrics: str | None = None,
    allowlist: dict | None = None,
    dcgm_honor_labels: bool = False,
    split: float | None = None,
) -> dict:
    """Write the OpenMetrics history (one file, or one per `split` seconds) and the
    answer; return a summary."""
    if end <= start:
        raise HistoryError("--to must be after --from")
    try:
        nodes = cluster.build_nodes(cluster.load(cluster_path))
    except (OSError, cluster.ClusterFileError, yaml.YAMLError) as exc:
        raise HistoryError(f"cluster file: {exc}") from None
    boot = format_time(as_datetime(start))
    for node in nodes:
        node["metadata"]["creationTimestamp"] = boot
        node["metadata"]["uid"] = object_uid("node", node["metadata"]["name"])
    workload = load_workload(workload_path, start, end)
    if threshold is not None:
        workload.threshold = threshold
    try:
        pattern = re.compile(metrics) if metrics else None
    except re.error as exc:
        raise HistoryError(f"--metrics: not a regular expression: {exc}") from None
    selected = (lambda name: bool(pattern.fullmatch(name))) if pattern else (lambda name: True)
    answer_path = answer_path or os.path.splitext(out)[0] + ".answer.json"
    meta = {
        "from": format_time(as_datetime(start)),
        "to": format_time(as_datetime(end)),
        "step_seconds": step,
        "threshold": workload.threshold,
        "busy_metric": BUSY_METRIC,
    }
    spools = answer = None
    began = time.monotonic()
    try:
        families = ksm.FAMILIES + dcgm.FAMILIES
        if split:
            announce = lambda line: print(line, flush=True)  # noqa: E731
            spools = SplitSpools(out, families, selected, split, announce)
        else:
            spools = Spools(out, families, selected)
        answer = (CsvAnswer if answer_path.endswith(".csv") else JsonAnswer)(answer_path, meta)
        history = History(nodes, workload, start, end, step, allowlist, dcgm_honor_labels, selected)
        history.play(spools, answer)
        spools.finish(out)
        answer.close()
    except BaseException:
        # Nothing half-written: no output, no answer, no spools.
        for partial in (spools, answer):
            if partial is not None:
                partial.abort()
        raise
    summary = {
        "samples": spools.lines,
        "answer_rows": answer.count,
        "seconds": round(time.monotonic() - began, 2),
        "out": out,
        "answer": answer_path,
    }
    if split:
        summary["files"] = spools.paths
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubesim history",
        description="Write Prometheus history (OpenMetrics) and its exact answer for a workload.",
    )
    parser.add_argument("--cluster", required=True, help="cluster file (YAML)")
    parser.add_argument("--workload", required=True, help="workload file (YAML or JSON)")
    parser.add_argument("--from", dest="start", required=True, help="first sample, RFC 3339")
    parser.add_argument("--to", dest="end", required=True, help="end (excluded), RFC 3339")
    parser.add_argument("--out", required=True, help="OpenMetrics file to write")
    parser.add_argument("--step", default="60s", help="time between samples (default 60s)")
    parser.add_argument("--answer", help="answer file, .json or .csv (default OUT.answer.json)")
    parser.add_argument(
        "--split",
        help="write OUT.000, OUT.001 ... each SPLIT long (e.g. 24h, aligned to the epoch), "
        "each announced on stdout as it is done",
    )
    parser.add_argument("--threshold", type=float, help="busy at or above this ratio")
    parser.add_argument("--metrics", help="only families whose name matches this regex")
    parser.add_argument(
        "--metric-labels-allowlist", help="kube-state-metrics allowlist (see python -m kubesim -h)"
    )
    parser.add_argument(
        "--dcgm-honor-labels",
        action="store_true",
        help="store DCGM's namespace/pod/container as scraped with honor_labels: true "
        "(default: exported_namespace/exported_pod/exported_container, as without it)",
    )
    args = parser.parse_args(argv)
    try:
        allowlist = None
        if args.metric_labels_allowlist is not None:
            allowlist = ksm.parse_allowlist(args.metric_labels_allowlist)
        if args.threshold is not None and not 0 <= args.threshold <= 1:
            raise HistoryError(f"--threshold: expected a ratio 0-1, got {args.threshold}")
        summary = generate(
            cluster_path=args.cluster,
            workload_path=args.workload,
            start=parse_moment(args.start, "--from"),
            end=parse_moment(args.end, "--to"),
            out=args.out,
            step=parse_seconds(args.step, "--step", minimum=1),
            answer_path=args.answer,
            threshold=args.threshold,
            metrics=args.metrics,
            allowlist=allowlist,
            dcgm_honor_labels=args.dcgm_honor_labels,
            split=parse_seconds(args.split, "--split", minimum=60) if args.split else None,
        )
    except (HistoryError, ValueError) as exc:
        print(f"python -m kubesim history: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"python -m kubesim history: error: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(summary))
    return 0
