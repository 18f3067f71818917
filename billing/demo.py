"""The demo's metering: a Prometheus scraping kubesim, when one is installed.

Imported by portal/demo.py before Django is set up: nothing here touches models.
With `prometheus` on the PATH, the demo starts it (kubesim's per-node DCGM
pages through file_sd without honor_labels, as an operator scrapes the
exporter, and kube-state-metrics with them), loads a generated month of
history first when kubesim can generate one, and backfills the ledger in the
background. Without it, the billing pages say what is missing.
"""

import shutil
import subprocess
import sys
from pathlib import Path

SCRAPE_INTERVAL = "15s"


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
    """True once kubesim has its `history` command (branch ksim-metrics)."""
    probe = subprocess.run(
        [python, "-m", "kubesim", "history", "--help"], capture_output=True, timeout=60
    )
    # Before it exists, argparse prints the server's usage (and exits 0 on --help).
    return probe.returncode == 0 and b"openmetrics" in probe.stdout.lower()


def plan(var_dir, kubesim_port, prometheus_port, python=sys.executable):
    """(env for the portal's processes, {name: command}, lines to print)."""
    var_dir = Path(var_dir)
    binary = shutil.which("prometheus")
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
    if not _history_supported(python):
        lines.append(
            "            no demo history yet (kubesim has no `history` command): "
            "usage appears as hours close."
        )
    url = f"http://127.0.0.1:{prometheus_port}"
    env = {
        "PORTAL_PROMETHEUS_URL": url,
        # The exporter is scraped without honor_labels, as on a real cluster.
        "PORTAL_BILLING_LABEL_NAMESPACE": "exported_namespace",
        "PORTAL_BILLING_LABEL_POD": "exported_pod",
        "PORTAL_BILLING_DELAY": "60",
        "PORTAL_BILLING_INTERVAL": "60",
    }
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
