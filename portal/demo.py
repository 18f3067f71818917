"""`make demo`: the whole portal on one machine with nothing to install.

Migrates and seeds an SQLite database, then runs kubesim (the simulated GPU
cluster), the web server, a Celery worker and Celery beat in the foreground
until Ctrl-C. The broker is kombu's SQLAlchemy transport on another SQLite
file (portal/broker.py), so no Redis is needed either. A process that dies is
started again, with a line on the console saying which and why; Ctrl-C stops
them all.
"""

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from billing import demo as billing_demo

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))
WEB_PORT = os.environ.get("PORT", "8000")
KUBESIM_PORT = os.environ.get("KUBESIM_PORT", "8001")
PROMETHEUS_PORT = os.environ.get("PROMETHEUS_PORT", "9090")
CLUSTER = (
    os.environ.get("PORTAL_DEMO_CLUSTER") or "kubesim"
)  # or kubernetes: `make demo CLUSTER=...`
CLUSTER_PORT = os.environ.get("CLUSTER_PORT", "6443")
KUBECTL = BASE_DIR / ".venv/bin/kubectl"
# A process that keeps dying is restarted after 1, 2, 4 ... 30 s; one that
# stayed up this long counts as healthy again.
MAX_RESTART_DELAY = 30
IDLE_RESOURCE = "nvidia.com/mig-3g.40gb"  # in vision's quota: the idle notebook may start
HEALTHY_AFTER = 60


def manage(*args, **env):
    """A management command: what it has to tell said on the console as the runner's
    own lines; its logging (stderr) into var/setup.log, whose last line is said if it
    fails."""
    log_path = VAR_DIR / "setup.log"
    with open(log_path, "ab") as log:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.strip():
            say(line.strip())
    if done.returncode:
        sys.exit(f"manage.py {args[0]} {exit_reason(done.returncode)}: {last_line(log_path)}")


def announce_figures(hold, say, url, interval=5):
    """Say once the month's figures are in: the history loaded (`hold` gone) and every
    closed hour metered by the beat. Reads the demo's database (Django set up here)."""
    import django
    from django.db import DatabaseError

    django.setup()
    from billing.actions import figures_in

    while True:
        try:
            through = None if hold.exists() else figures_in()
        except DatabaseError:  # SQLite busy while the beat writes: ask again
            through = None
        if through is not None:
            say(f"billing: the month's figures are in, metered through {through:%Y-%m-%d %H:%M} "
                f"UTC: {url}billing/")  # fmt: skip
            return
        time.sleep(interval)


def demo_secret_key():
    """The demo's own key, made once per checkout (production must set one)."""
    path = VAR_DIR / "demo-secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


def say(message):
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def exit_reason(returncode):
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def last_line(path):
    """The log's last non-empty line: usually the error that ended the process."""
    try:
        with open(path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - 4096, 0))
            lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")[:300]


class Service:
    """One child process, its log under var/, and how often it was restarted."""

    def __init__(self, name, command, ready=None, ready_within=30):
        self.name, self.command, self.ready = name, command, ready
        self.ready_within = ready_within
        self.log_path = VAR_DIR / f"{name}.log"
        self.process = None
        self.restarts = 0
        self.started_at = 0.0
        self.restart_at = None

    def start(self):
        if self.ready is not None:
            self.ready.unlink(missing_ok=True)  # written afresh once the process is up
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, cwd=BASE_DIR, stdout=log, stderr=log)
        self.started_at = time.monotonic()
        if self.ready is not None:
            _wait_for(self.ready, self.process, self.ready_within)

    def check(self, now):
        """Restart the process if it died (after a delay if it keeps dying)."""
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.restart_at = None
                self.start()
            return
        returncode = self.process.poll()
        if returncode is None:
            return
        if now - self.started_at > HEALTHY_AFTER:
            self.restarts = 0
        delay = min(2**self.restarts, MAX_RESTART_DELAY) if self.restarts else 0
        self.restarts += 1
        # Killed, the signal says why; exited, its last words usually do.
        why = last_line(self.log_path) if returncode >= 0 else ""
        say(
            f"{self.name} {exit_reason(returncode)}"
            + (f" (last log line: {why})" if why else "")
            + f"; restarting it{f' in {delay} s' if delay else ''}"
            + f" (restart {self.restarts}, log {self.log_path})"
        )
        self.restart_at = now + delay

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self):
        if self.process is None:
            return
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Cluster:
    """The demo's cluster: kubesim (the default, nothing to build), or the real control
    plane of controlplane/ with KWOK GPU nodes (`make demo CLUSTER=kubernetes`)."""

    def __init__(self, kind):
        if kind == "kubernetes":
            from controlplane.binaries import missing
            from controlplane.runner import free_port

            absent = missing()
            if absent:
                sys.exit(f"make demo CLUSTER=kubernetes: {absent}")
            directory = VAR_DIR / "cluster"
            ksm, dcgm = free_port(), free_port()
            ready = directory / "ready.json"
            self.kubeconfig = directory / "kubeconfig"
            self.service = Service("cluster", [
                sys.executable, "-m", "controlplane", "--dir", str(directory),
                "--port", CLUSTER_PORT, "--ksm-port", str(ksm), "--dcgm-port", str(dcgm),
                "--ready-file", str(ready), "--dra",
            ], ready=ready, ready_within=180)  # fmt: skip
            self.dra_example = VAR_DIR / "dra-example.yaml"
            # The exporter pages are scraped without honor_labels, as a DaemonSet is.
            self.scrape = (
                "  - job_name: dcgm\n"
                f"    http_sd_configs: [{{url: 'http://127.0.0.1:{dcgm}/targets'}}]\n"
                "  - job_name: kube-state-metrics\n"
                "    honor_labels: true\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{ksm}']}}]\n"
            )
            self.source = "kube-state-metrics and the DCGM pages"
            self.clock = "real"  # the real controllers keep real time
            self.lines = [
                f"  Cluster     Kubernetes v1.37.2 with KWOK GPU nodes at https://127.0.0.1:"
                f"{CLUSTER_PORT}   (CLUSTER_PORT={CLUSTER_PORT})",
                f"              {KUBECTL} --kubeconfig {self.kubeconfig} get resourcequota -A",
                "  DRA         flavor h100-dra: the GPUs of gpu-h100-dra-0's ResourceSlice; "
                "vision's example runs on one",
                f"              {KUBECTL} --kubeconfig {self.kubeconfig} get resourceclaims -A",
            ]
            self.batch_hint = "(real time: the window opens when its hour comes)"
            return
        self.kubeconfig = VAR_DIR / "kubeconfig"
        self.dra_example = None  # kubesim serves no DRA
        self.service = Service("kubesim", [
            sys.executable, "-m", "kubesim", "--port", KUBESIM_PORT,
            "--state", str(VAR_DIR / "kubesim-state.json"), "--kubeconfig", str(self.kubeconfig),
            "--dcgm-file-sd", str(VAR_DIR / "dcgm-targets.json"),
        ], ready=self.kubeconfig)  # fmt: skip
        self.scrape, self.source = None, "kubesim"
        # Batch windows run on kubesim's clock, as its Jobs' deadlines do; it starts at
        # the real time, and moving it forward opens the demo window at once.
        self.clock = "kubesim"
        self.lines = [
            f"  Cluster     kubesim at http://127.0.0.1:{KUBESIM_PORT}   "
            f"(KUBESIM_PORT={KUBESIM_PORT})",
            f"              {KUBECTL} --kubeconfig {self.kubeconfig} get resourcequota -A",
        ]
        self.batch_hint = (
            "now, on kubesim's clock: curl -d '{\"advance\": 300}' "
            f"http://127.0.0.1:{KUBESIM_PORT}/_sim/clock"
        )

    def run_dra_example(self, say):
        """vision's DRA example: the real scheduler allocates an H100 of the DRA pool."""
        key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
        self.apply_with_quota(self.dra_example, key, "DRA example", say)

    def apply_with_quota(self, manifest, key, what, say, timeout=300):
        """Apply vision's `manifest` once the worker has put `key` in the team's quota."""
        kubectl = [str(KUBECTL), "--kubeconfig", str(self.kubeconfig)]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            quota = subprocess.run(
                [*kubectl, "get", "resourcequota", "gpu-quota", "-n", "vision", "-o", "json"],
                capture_output=True, text=True,
            )  # fmt: skip
            if quota.returncode == 0 and key in quota.stdout:
                applied = subprocess.run(
                    [*kubectl, "apply", "-f", str(manifest)], capture_output=True, text=True
                )
                say(f"{what} for vision: {(applied.stdout or applied.stderr).strip()}")
                return
            time.sleep(2)
        say(f"{what} for vision not applied: the team's quota never listed {key}")


def main():
    cluster = Cluster(CLUSTER)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("PORTAL_KUBECONFIG", str(cluster.kubeconfig))
    os.environ.setdefault("PORTAL_BASE_URL", f"http://127.0.0.1:{WEB_PORT}")
    os.environ.setdefault("PORTAL_CLOCK", cluster.clock)
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DJANGO_SECRET_KEY", demo_secret_key())
    # Billing's Prometheus (if installed): its settings reach web, worker and beat.
    billing_env, billing_commands, billing_lines, billing_background = billing_demo.plan(
        VAR_DIR, KUBESIM_PORT, PROMETHEUS_PORT, scrape=cluster.scrape, source=cluster.source
    )
    for key, value in billing_env.items():
        os.environ.setdefault(key, value)
    from django.conf import settings

    from portal import broker

    broker.prepare(settings.CELERY_BROKER_URL)
    manage("migrate", "--noinput", "-v0")
    manage("collectstatic", "--noinput", "-v0")
    # Seeding mails reviewers about the demo requests: keep that off the console.
    manage("seed_demo", EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
    # kubesim is not up yet; its clock starts at the real time once it is.
    manage("seed_batch", PORTAL_CLOCK="real")
    if cluster.dra_example:
        manage("seed_dra", "--example", str(cluster.dra_example))
    idle_notebook = VAR_DIR / "idle-notebook.yaml"
    manage("seed_idle", "--notebook", str(idle_notebook))

    celery = [sys.executable, "-m", "celery", "-A", "portal"]
    services = [
        cluster.service,
        *(Service(name, command) for name, command in billing_commands.items()),
        Service("web", [
            sys.executable, "manage.py", "runserver", f"127.0.0.1:{WEB_PORT}", "--noreload",
        ]),
        # One worker: gossip and mingle talk between workers, which this broker cannot carry.
        Service("worker", [
            *celery, "worker", "--loglevel=INFO", "--concurrency=2",
            "--without-gossip", "--without-mingle",
        ]),
        Service("beat", [
            *celery, "beat", "--loglevel=INFO",
            "--schedule", str(VAR_DIR / "celerybeat-schedule"),
        ]),
    ]  # fmt: skip
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    # Ctrl-C stops the demo even when it was started with SIGINT ignored (in
    # the background of a script); the children get it from the terminal too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for service in services:
            service.start()
        print(
            f"""
GPU portal demo is running (in the foreground: Ctrl-C stops it).

  Portal      http://127.0.0.1:{WEB_PORT}/            (PORT={WEB_PORT})
  API docs    http://127.0.0.1:{WEB_PORT}/api/docs/
  Logins      admin / demo  (platform admin, reviews requests)
              alice / demo  (team vision)   carol / demo  (team vision, manager)
              bob / demo    (team nlp)      dave / demo   (team speech, manager)
{chr(10).join(cluster.lines)}
  Batch       a window opens a few minutes from now: http://127.0.0.1:{WEB_PORT}/batch/
              {KUBECTL} --kubeconfig {cluster.kubeconfig} get jobs -A
              {cluster.batch_hint}
  Idle        vision's notebook holds a MIG slice it never uses: announced within ~2 min,
              scaled to zero 2 min later (idle policy on a100-3g40; needs Prometheus)
              http://127.0.0.1:{WEB_PORT}/billing/teams/vision/workloads/vision/Deployment/notebook/
              (its notice links there; vision's page says when and why: /teams/vision/)
  Fleet cost  where the GPU money went, the history's month (admin; needs Prometheus):
              http://127.0.0.1:{WEB_PORT}/billing/fleet/
  Logs        {VAR_DIR}/{{web,worker,beat,{cluster.service.name}}}.log
{chr(10).join("  " + line for line in billing_lines)}

A process that dies is restarted, with a line here saying which and why.
Press Ctrl-C to stop.
""",
            flush=True,
        )
        if cluster.dra_example:
            threading.Thread(target=cluster.run_dra_example, args=(say,), daemon=True).start()
        threading.Thread(
            target=cluster.apply_with_quota,
            args=(idle_notebook, IDLE_RESOURCE, "Idle notebook", say),
            daemon=True,
        ).start()
        if billing_background is not None:
            # The portal answers meanwhile; the thread ends with the demo.
            threading.Thread(target=billing_background, args=(say,), daemon=True).start()
        if billing_commands:
            hold = Path(billing_env["PORTAL_BILLING_HOLD_FILE"])
            threading.Thread(
                target=announce_figures,
                args=(hold, say, f"http://127.0.0.1:{WEB_PORT}/"),
                daemon=True,
            ).start()
        while not stopping:
            now = time.monotonic()
            for service in services:
                service.check(now)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        say("stopping")
        for service in services:
            service.stop()
        for service in services:
            service.wait()


def _wait_for(path, process, timeout=30):
    deadline = time.monotonic() + timeout
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
