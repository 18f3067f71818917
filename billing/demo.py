"""The demo's metering: a Prometheus scraping kubesim, when one is installed.

Imported by portal/demo.py before Django is set up: nothing here touches models.
With `prometheus` on the PATH, the demo starts it (kubesim's per-node DCGM
pages through file_sd without honor_labels, as an operator scrapes the
exporter, and kube-state-metrics with them). On a first run it loads 30 days
of history that `python -m kubesim history` generates for the demo teams
(`promtool tsdb create-blocks-from openmetrics`), and the beat meters those
days into the ledger in the background. Without Prometheus, the billing pages
say what is missing.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

# The cluster `make demo`'s kubesim runs (its default).
DEMO_CLUSTER = Path(__file__).resolve().parents[1] / "kubesim" / "clusters" / "demo.yaml"
SCRAPE_INTERVAL = "15s"
HISTORY_DAYS = 30
# Seconds: a month of the demo cluster loads in minutes, not an hour. Only the
# generated hours are metered at this step (PORTAL_BILLING_HISTORY_*); live
# hours at the production one, so a 3-minute batch job costs 3 minutes.
HISTORY_STEP = 1800
# The families billing reads (kubesim writes only these to the history).
HISTORY_METRICS = (
    "kube_pod_container_resource_requests|kube_pod_status_phase|kube_pod_owner|"
    "kube_node_labels|kube_node_status_allocatable|DCGM_FI_PROF_GR_ENGINE_ACTIVE|"
    "DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_XID_ERRORS"
)
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "none"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}


def demo_workload(days):
    """What the demo teams ran: a daily trainer, an idle notebook, MIG and spot jobs."""
    daily = {"every": "1d", "count": days}
    return {
        "threshold": 0.05,
        "namespaces": [{"name": "vision", "team": "vision"}, {"name": "nlp", "team": "nlp"}],
        "workloads": [
            {"namespace": "vision", "name": "train", "kind": "Job", "gpus": 4,
             "nodeSelector": H100, "start": "+8h", "duration": "10h", "profile": "daily",
             "busyHours": "09:00-15:00", "util": 85, "fbUsed": 60000, "repeat": daily},
            {"namespace": "vision", "name": "notebook", "gpus": 2, "nodeSelector": A100,
             "start": "+9h", "duration": "8h", "profile": "idle-after", "idleAfter": "1h",
             "util": 40, "fbUsed": 9000, "repeat": daily},
            {"namespace": "nlp", "name": "finetune", "kind": "Job",
             "resource": "nvidia.com/mig-3g.40gb", "gpus": 2, "start": "+2h",
             "duration": "20h", "profile": "constant", "util": 55, "repeat": daily},
            {"namespace": "nlp", "name": "eval", "kind": "Job", "gpus": 1, "nodeSelector": L4,
             "start": "+12h", "duration": "6h", "profile": "bursty", "util": 70,
             "repeat": daily},
        ],
    }  # fmt: skip


def prometheus_config(var_dir, kubesim_port):
    targets = Path(var_dir) / "dcgm-targets.json"
    return (
        f"global: {{scrape_interval: {SCRAPE_INTERVAL}, evaluation_interval: 1m}}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        f"    file_sd_configs: [{{files: ['{targets}'], refresh_interval: 5s}}]\n"
        "  - job_name: kube-state-metrics\n"
        "    honor_labels: true\n"
        "    metrics_path: /metrics/kube-state-metrics\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{kubesim_port}']}}]\n"
    )


def _history_supported(python):
    """True once kubesim has its `history` command."""
    probe = subprocess.run(
        [python, "-m", "kubesim", "history", "--help"], capture_output=True, timeout=60
    )
    # Before it exists, argparse prints the server's usage (and exits 0 on --help).
    return probe.returncode == 0 and b"openmetrics" in probe.stdout.lower()


def load_history(python, var_dir, data, now=None, days=HISTORY_DAYS):
    """Generate `days` of demo history and turn it into blocks under `data`."""
    now = now or datetime.now(UTC)
    end = now.replace(minute=0, second=0, microsecond=0)
    start = (end - timedelta(days=days)).replace(hour=0)
    workload = Path(var_dir) / "history-workload.json"
    workload.write_text(json.dumps(demo_workload(days + 1)))
    out = Path(var_dir) / "history.om"
    began = time.monotonic()
    subprocess.run(
        [python, "-m", "kubesim", "history", "--cluster", str(DEMO_CLUSTER),
         "--workload", str(workload),
         "--from", start.isoformat().replace("+00:00", "Z"),
         "--to", end.isoformat().replace("+00:00", "Z"), "--out", str(out),
         "--step", f"{HISTORY_STEP}s", "--metrics", HISTORY_METRICS],
        check=True, capture_output=True, timeout=1800,
    )  # fmt: skip
    subprocess.run(
        [shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from", "openmetrics",
         str(out), str(data)],
        check=True, capture_output=True, timeout=1800,
    )  # fmt: skip
    out.unlink()
    (Path(var_dir) / HISTORY_END_FILE).write_text(end.isoformat())
    return start, time.monotonic() - began


HISTORY_END_FILE = "history-end"


def plan(var_dir, kubesim_port, prometheus_port, python=sys.executable):
    """(env for the portal's processes, {name: command}, lines to print)."""
    var_dir = Path(var_dir)
    # DEMO_PROMETHEUS=off runs the demo without metering (the runner's own tests).
    binary = shutil.which("prometheus") if os.environ.get("DEMO_PROMETHEUS") != "off" else None
    if binary is None:
        return (
            {"PORTAL_PROMETHEUS_URL": ""},
            {},
            [
                "Billing     no `prometheus` on the PATH: the Spend pages show no usage.",
                "            Install it (apt-get install prometheus) and run make demo again.",
            ],
        )
    data = var_dir / "prometheus"
    config = var_dir / "prometheus.yml"
    config.write_text(prometheus_config(var_dir, kubesim_port))
    lines = [
        f"Billing     Prometheus at http://127.0.0.1:{prometheus_port}/ scraping kubesim "
        f"every {SCRAPE_INTERVAL} ({binary}); logs in {var_dir}/prometheus.log",
    ]
    env = {
        "PORTAL_PROMETHEUS_URL": f"http://127.0.0.1:{prometheus_port}",
        # The exporter is scraped without honor_labels, as on a real cluster.
        "PORTAL_BILLING_LABEL_NAMESPACE": "exported_namespace",
        "PORTAL_BILLING_LABEL_POD": "exported_pod",
        "PORTAL_BILLING_DELAY": "60",
        "PORTAL_BILLING_INTERVAL": "60",
        "PORTAL_BILLING_BACKFILL_HOURS": str((HISTORY_DAYS + 1) * 24),
        "PORTAL_BILLING_HOURS_PER_RUN": "200",
    }
    if data.exists():
        lines.append(f"            history and live samples kept in {data} (make clean drops them)")
    elif not _history_supported(python):
        lines.append(
            "            no demo history (this kubesim has no `history` command): "
            "usage appears as hours close."
        )
    else:
        print(f"Generating {HISTORY_DAYS} days of demo GPU history for Prometheus...", flush=True)
        start, seconds = load_history(python, var_dir, data)
        lines.append(
            f"            loaded {HISTORY_DAYS} days of generated history from {start:%Y-%m-%d} "
            f"({seconds:.0f} s); the beat meters it into the ledger over the next minutes"
        )
    end_file = var_dir / HISTORY_END_FILE
    if end_file.exists():
        # The generated hours keep their own step; every later one is metered
        # at the production default (PORTAL_BILLING_STEP, the scrape's minute).
        env["PORTAL_BILLING_HISTORY_STEP"] = str(HISTORY_STEP)
        env["PORTAL_BILLING_HISTORY_END"] = end_file.read_text().strip()
    commands = {
        "prometheus": [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=400d",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
        ]
    }
    return env, commands, lines
