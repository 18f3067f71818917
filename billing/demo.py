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
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

# The cluster `make demo`'s kubesim runs (its default).
DEMO_CLUSTER = Path(__file__).resolve().parents[1] / "kubesim" / "clusters" / "demo.yaml"
SCRAPE_INTERVAL = "15s"
HISTORY_DAYS = 30
# Seconds between the history's samples: the production metering step
# (PORTAL_BILLING_STEP's default), so the generated month is metered as live hours
# are and a short job costs its minutes, not a sample's half hour.
HISTORY_STEP = 60
# The families billing reads (kubesim writes only these to the history). Not
# DCGM_FI_DEV_GPU_UTIL: every reader takes it only where the profiling field is
# missing, and kubesim's GPUs all have it (a sixth of the bytes; the live scrape has it).
HISTORY_METRICS = (
    "kube_pod_container_resource_requests|kube_pod_status_phase|kube_pod_owner|kube_pod_start_time|"
    "kube_node_labels|kube_node_status_allocatable|DCGM_FI_PROF_GR_ENGINE_ACTIVE|"
    "DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_XID_ERRORS"
)
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "none"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}


def demo_workload(days, start=None, end=None):
    """What the demo teams ran, each with its habits: vision trains well (long jobs
        keeping their H100s busy); nlp leaves A100 notebooks up through the nights (busy
        9-18 UTC) and idle through the weekends, next to a steady MIG fine-tune and bursty
        evaluations on L4. (speech holds 4 L4s it does not use: seed_demo's request, held
    from before the history's start.)
        And what a month brings: XIDs (one that kills a training run mid-month, two in the
        last day for the GPU health page) and two spot reclaims of the L4 nodes nlp's
        evaluations run on."""
    daily = {"every": "1d", "count": days}
    weeks = {"every": "7d", "count": days // 7 + 2}
    # Hours from `start` (a UTC midnight) to its next Monday and Saturday.
    weekday = start.weekday() if start else 0
    hours = (end - start).total_seconds() / 3600 if start and end else days * 24
    monday = (7 - weekday) % 7 * 24
    saturday = (5 - weekday) % 7 * 24
    workloads = [
            {"namespace": "vision", "name": "train", "kind": "Job", "gpus": 4,
             "nodeSelector": H100, "start": "+8h", "duration": "10h", "profile": "busy",
             "util": 92, "fbUsed": 71000, "repeat": daily},
            {"namespace": "vision", "name": "eval", "kind": "Job", "gpus": 1,
             "nodeSelector": A100, "start": "+19h", "duration": "1h", "profile": "constant",
             "util": 75, "fbUsed": 30000, "repeat": daily},
            {"namespace": "nlp", "name": "notebook", "gpus": 2, "nodeSelector": A100,
             "start": f"+{monday + 8}h", "duration": "4d16h", "profile": "daily",
             "busyHours": "09:00-18:00", "util": 35, "fbUsed": 9000, "repeat": weeks},
            {"namespace": "nlp", "name": "notebook-weekend", "gpus": 2, "nodeSelector": A100,
             "start": f"+{saturday}h", "duration": "2d8h", "profile": "idle",
             "fbUsed": 9000, "repeat": weeks},
            {"namespace": "nlp", "name": "finetune", "kind": "Job",
             "resource": "nvidia.com/mig-3g.40gb", "gpus": 2, "start": "+2h",
             "duration": "20h", "profile": "constant", "util": 55, "repeat": daily},
            {"namespace": "nlp", "name": "eval", "kind": "Job", "gpus": 1, "nodeSelector": L4,
             "start": "+12h", "duration": "6h", "profile": "bursty", "util": 70,
             "repeat": daily},
    ]  # fmt: skip
    last, mid = hours, days // 2 * 24  # hours from `start`: the end, the middle day
    incidents = [
        # Double-bit ECC at 11:10 on an H100 vision trains on (08-18): the run is lost
        # (credited) and the GPU out of service from then on.
        (mid + 11 + 1 / 6, {"xid": 48, "node": "gpu-h100-0", "gpu": 2}),
        # The L4 spot nodes go during nlp's evaluations (12-18), back hours later.
        (9 * 24 + 14, {"reclaim": "gpu-l4-0", "returnsAfter": "3h"}),
        (20 * 24 + 15, {"reclaim": "gpu-l4-1", "returnsAfter": "1h"}),
        # The last day, on the GPU health page: an application's fault, and an A100
        # (where nlp's notebooks live) fallen off the bus five hours ago.
        (last - 20, {"xid": 13, "node": "gpu-h100-0", "gpu": 1}),
        (last - 5, {"xid": 79, "node": "gpu-a100-0", "gpu": 0}),
    ]
    return {
        "threshold": 0.05,
        "namespaces": [{"name": "vision", "team": "vision"}, {"name": "nlp", "team": "nlp"}],
        # A few days' history may end before the first Monday or Saturday comes.
        "workloads": [w for w in workloads if int(w["start"][1:-1]) < hours],
        "incidents": [
            {"at": f"+{round(at * 60)}m", **incident}
            for at, incident in incidents
            if 0 <= at < hours
        ],
    }


GRAFANA_DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "gpu-idle.json"


def grafana_provisioning(var_dir, prometheus_url):
    """Files for a Grafana to provision from (docs/billing.md, "Grafana"): the idle
    dashboard (deploy/grafana's, with the demo's exporter labels chosen) and the demo's
    Prometheus as its data source. The demo starts no Grafana; returns the directory
    to give one as its provisioning path."""
    root = Path(var_dir) / "grafana"
    provisioning = root / "provisioning"
    for directory in (
        root / "dashboards",
        provisioning / "dashboards",
        provisioning / "datasources",
    ):
        directory.mkdir(parents=True, exist_ok=True)
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    for variable in dashboard["templating"]["list"]:
        if variable["name"] in ("namespace_label", "pod_label"):
            label = "exported_" + variable["name"].removesuffix("_label")
            variable["current"] = {"text": label, "value": label}
    (root / "dashboards" / GRAFANA_DASHBOARD.name).write_text(json.dumps(dashboard, indent=2))
    (provisioning / "dashboards" / "gpu-portal.yaml").write_text(
        "apiVersion: 1\n"
        "providers:\n"
        "  - name: gpu-portal\n"
        "    folder: GPU portal\n"
        "    type: file\n"
        f"    options: {{path: {json.dumps(str(root / 'dashboards'))}}}\n"
    )
    (provisioning / "datasources" / "gpu-portal.yaml").write_text(
        "apiVersion: 1\n"
        "datasources:\n"
        "  - name: GPU portal demo\n"
        "    type: prometheus\n"
        "    access: proxy\n"
        f"    url: {prometheus_url}\n"
        "    isDefault: true\n"
    )
    return provisioning


def prometheus_config(var_dir, kubesim_port, scrape=None):
    """Prometheus' configuration: kubesim's exporter pages, or the `scrape` jobs given
    (the real control plane's kube-state-metrics and DCGM pages)."""
    targets = Path(var_dir) / "dcgm-targets.json"
    head = (
        f"global: {{scrape_interval: {SCRAPE_INTERVAL}, evaluation_interval: 1m}}\n"
        "scrape_configs:\n"
    )
    if scrape:
        return head + scrape
    return head + (
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


# promtool parses its whole input once per block it writes: kubesim writes the history
# as a file per block, and each becomes its block while the next part is generated (the
# two run side by side). 18 h: promtool makes blocks of 2 h x 3^n (a --max-block-duration
# of 24h gives 18 h ones), aligned to the epoch as kubesim's parts are.
HISTORY_BLOCK = "18h"
HISTORY_LOADED = "history-loaded"  # under var/: written once Prometheus has the history
# Prometheus looks for new blocks in its data directory once a minute.
BLOCKS_SEEN_WITHIN = 120


def history_span(now, days=HISTORY_DAYS):
    """(start, end) of the demo history loaded at `now`: `days` back from the hour, from
    that day's midnight (seed_demo's unused quota is held from before its start)."""
    end = now.replace(minute=0, second=0, microsecond=0)
    return (end - timedelta(days=days)).replace(hour=0), end


def load_history(python, var_dir, data, now=None, days=HISTORY_DAYS, progress=print):
    """Generate `days` of demo history and add it to `data` as TSDB blocks: written
    beside it, then moved in whole (a running Prometheus takes them at its next look)."""
    start, end = history_span(now or datetime.now(UTC), days)
    var_dir = Path(var_dir)
    workload = var_dir / "history-workload.json"
    workload.write_text(json.dumps(demo_workload(days + 1, start, end)))
    out = var_dir / "history.om"
    staging = var_dir / "history-blocks"
    shutil.rmtree(staging, ignore_errors=True)
    began = time.monotonic()
    progress(
        f"history: generating {days} days of GPU samples every {HISTORY_STEP} s "
        f"from {start:%Y-%m-%d}, {HISTORY_BLOCK} at a time"
    )
    generator = subprocess.Popen(
        [python, "-m", "kubesim", "history", "--cluster", str(DEMO_CLUSTER),
         "--workload", str(workload),
         "--from", start.isoformat().replace("+00:00", "Z"),
         "--to", end.isoformat().replace("+00:00", "Z"), "--out", str(out),
         "--step", f"{HISTORY_STEP}s", "--metrics", HISTORY_METRICS,
         "--split", HISTORY_BLOCK],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    told = 0  # days said on the console so far
    try:
        for line in generator.stdout:
            if not line.startswith('{"written"'):
                continue
            written = json.loads(line)
            part = Path(written["written"])
            subprocess.run(
                [shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from",
                 "openmetrics", f"--max-block-duration={HISTORY_BLOCK}", str(part), str(staging)],
                check=True, capture_output=True, timeout=1800,
            )  # fmt: skip
            part.unlink()
            until = min(datetime.fromisoformat(written["until"].replace("Z", "+00:00")), end)
            covered = (until - start) // timedelta(days=1)
            if covered >= told + 5 or until == end:
                told = covered
                # The span is the `days` asked for and today's hours before them (it
                # starts at midnight): its share, not its rounded days, which said
                # "4 of 4" for 3 days after noon.
                progress(
                    f"history: {(until - start) / (end - start):.0%} of {days} days in "
                    f"Prometheus blocks (up to {until:%Y-%m-%d %H:%M} UTC)"
                )
        if generator.wait(timeout=1800):
            raise subprocess.CalledProcessError(
                generator.returncode, "kubesim history", stderr=generator.stderr.read()
            )
    finally:
        if generator.poll() is None:
            generator.kill()
            generator.wait()
        generator.stdout.close()
        generator.stderr.close()
    data.mkdir(parents=True, exist_ok=True)
    blocks = [block for block in staging.iterdir() if (block / "meta.json").is_file()]
    for block in blocks:
        block.rename(data / block.name)  # one directory each, on one filesystem: whole
    shutil.rmtree(staging, ignore_errors=True)
    progress(f"history: {len(blocks)} blocks in {data}")
    return start, time.monotonic() - began


def _prometheus_has(url, instant):
    """True once Prometheus answers for `instant` (it has the history's blocks)."""
    query = urllib.parse.urlencode(
        {"query": "count(kube_node_status_allocatable)", "time": instant.timestamp()}
    )
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
            return bool(json.load(response)["data"]["result"])
    except (OSError, ValueError, KeyError):
        return False


def load_history_in_background(python, var_dir, data, url, hold, say, now=None):
    """`make demo`'s history load, in a thread while the portal already answers:
    progress on the console and in the hold file (shown on the Spend pages, and
    keeping the beat from metering hours Prometheus has no samples for yet), which
    goes once Prometheus answers for the history."""
    var_dir, hold = Path(var_dir), Path(hold)

    def progress(line):
        say(line)
        text = line.removeprefix("history: ")
        hold.write_text(f"{text[:1].upper()}{text[1:]}.\n")  # capitalize() lowercased "Prometheus"

    began = time.monotonic()
    try:
        start, _ = load_history(
            python, var_dir, data, now=now, days=HISTORY_DAYS, progress=progress
        )
        deadline = time.monotonic() + BLOCKS_SEEN_WITHIN
        while not _prometheus_has(url, start + timedelta(hours=12)):
            if time.monotonic() > deadline:
                say(f"history: Prometheus at {url} does not show it yet; metering goes on")
                break
            time.sleep(2)
        else:
            (var_dir / HISTORY_LOADED).write_text(f"{start.isoformat()}\n")
            say(
                f"history: {HISTORY_DAYS} days from {start:%Y-%m-%d} in Prometheus "
                f"({time.monotonic() - began:.0f} s); the beat meters them now"
            )
    except (OSError, subprocess.SubprocessError) as exc:
        say(f"history: not loaded ({exc}); usage appears as hours close")
    finally:
        hold.unlink(missing_ok=True)


def plan(var_dir, kubesim_port, prometheus_port, python=sys.executable, *, scrape=None,
         source="kubesim"):  # fmt: skip
    """(env for the portal's processes, {name: command}, lines to print, and what to run
    in the background once they are up (a function of the console's `say`), or None).
    `scrape` and `source` name other exporters than kubesim's (the real control plane)."""
    var_dir = Path(var_dir)
    # DEMO_PROMETHEUS=off runs the demo without metering (the runner's own tests),
    # =live with Prometheus scraping but no history loaded.
    binary = shutil.which("prometheus") if os.environ.get("DEMO_PROMETHEUS") != "off" else None
    if binary is None:
        return (
            {"PORTAL_PROMETHEUS_URL": ""},
            {},
            [
                "Billing     no `prometheus` on the PATH: the Spend pages show no usage.",
                "            Install it (apt-get install prometheus) and run make demo again.",
            ],
            None,
        )
    data = var_dir / "prometheus"
    config = var_dir / "prometheus.yml"
    config.write_text(prometheus_config(var_dir, kubesim_port, scrape))
    lines = [
        f"Billing     Prometheus at http://127.0.0.1:{prometheus_port}/   "
        f"(PROMETHEUS_PORT={prometheus_port})",
        f"            scraping {source} every {SCRAPE_INTERVAL} ({binary}); "
        f"logs in {var_dir}/prometheus.log",
    ]
    hold = var_dir / "history-loading"
    env = {
        "PORTAL_PROMETHEUS_URL": f"http://127.0.0.1:{prometheus_port}",
        # The exporter is scraped without honor_labels, as on a real cluster.
        "PORTAL_BILLING_LABEL_NAMESPACE": "exported_namespace",
        "PORTAL_BILLING_LABEL_POD": "exported_pod",
        "PORTAL_BILLING_DELAY": "60",
        "PORTAL_BILLING_INTERVAL": "60",
        "PORTAL_BILLING_BACKFILL_HOURS": str((HISTORY_DAYS + 1) * 24),
        "PORTAL_BILLING_HOURS_PER_RUN": "200",
        "PORTAL_BILLING_HOLD_FILE": str(hold),
    }
    provisioning = grafana_provisioning(var_dir, env["PORTAL_PROMETHEUS_URL"])
    lines.append(
        f"            Grafana: the idle dashboard and this Prometheus, provisioned from "
        f"{provisioning}"
    )
    lines.append(
        f"            (GF_PATHS_PROVISIONING={provisioning} grafana server; docs/billing.md)"
    )
    background = None
    if os.environ.get("DEMO_PROMETHEUS") == "live":
        # Live samples only (the demo runner's idle test): no history to wait for.
        lines.append("            live samples only (DEMO_PROMETHEUS=live): no demo history")
        env["PORTAL_BILLING_BACKFILL_HOURS"] = "1"
    elif (var_dir / HISTORY_LOADED).exists():
        hold.unlink(missing_ok=True)  # left by a run stopped while it loaded
        lines.append(f"            history and live samples kept in {data} (make clean drops them)")
    elif not _history_supported(python):
        lines.append(
            "            no demo history (this kubesim has no `history` command): "
            "usage appears as hours close."
        )
    else:
        # Held from the start: the beat must not meter the history's hours before they load.
        hold.write_text(f"Loading {HISTORY_DAYS} days of demo history into Prometheus.\n")
        lines.append(
            f"            {HISTORY_DAYS} days of demo history load in the background "
            "(progress below; the Spend pages say so until it is in)"
        )
        # The history ends at the hour the demo started: every hour, generated or
        # scraped, is metered at the production step (PORTAL_BILLING_STEP's default).
        loading_from = datetime.now(UTC)

        def background(say):
            load_history_in_background(
                python, var_dir, data, env["PORTAL_PROMETHEUS_URL"], hold, say, now=loading_from
            )

    legacy = var_dir / "history-end"
    if legacy.exists():
        # History an older demo loaded at its 30-minute step keeps it until `make clean`.
        env["PORTAL_BILLING_HISTORY_STEP"] = "1800"
        env["PORTAL_BILLING_HISTORY_END"] = legacy.read_text().strip()
    commands = {
        "prometheus": [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=400d",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
        ]
    }
    return env, commands, lines, background
