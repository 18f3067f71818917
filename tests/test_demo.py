"""`make demo`'s runner: a process that dies is started again, with a line
saying which and why; Ctrl-C still stops everything. And what the demo shows
in its first minutes: the batch window's Jobs, vision's idle notebook announced
and scaled to zero."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from controlplane.binaries import missing
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def children(pid):
    """{pid: command line} of the process's children."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == pid:
            found[int(entry.name)] = cmdline
    return found


def worker_pid(runner):
    workers = [
        pid for pid, cmd in children(runner.pid).items() if "celery" in cmd and " worker" in cmd
    ]
    return workers[0] if len(workers) == 1 else None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def demo_env(tmp_path, **extra):
    """The demo's environment as a fresh checkout has it, on free ports."""
    own = ("DATABASE_URL", "CELERY_BROKER_URL", "PORTAL_KUBECONFIG", "KUBECONFIG", "PORTAL_CLOCK")
    env = {key: value for key, value in os.environ.items() if key not in own}
    return env | {
        "PORT": free_port(),
        "KUBESIM_PORT": free_port(),
        "PORTAL_VAR_DIR": str(tmp_path),
        "PYTHONUNBUFFERED": "1",
        "DEMO_PROMETHEUS": "off",  # billing's history load is not what these tests are about
        **extra,
    }


def start_demo(env, console):
    """`make demo`'s runner in its own process group, as a terminal gives it."""
    with open(console, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "portal.demo"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def idle_log(env, port):
    """vision's idle actions log as alice reads it from the API: (kind, name, what)."""
    token = subprocess.run(
        [sys.executable, "manage.py", "api_token", "alice"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/idle-actions/?team=vision",
        headers={"Authorization": f"Token {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        rows = json.loads(response.read())["results"]
    return [(row["workload_kind"], row["workload_name"], row["kind"]) for row in rows]


def test_a_dead_worker_is_restarted_and_ctrl_c_stops_everything(tmp_path):
    """...and meanwhile vision's idle notebook is announced and scaled to zero, the
    demo's idle policy acting on what Prometheus scrapes from kubesim."""
    env = demo_env(tmp_path, DEMO_PROMETHEUS="live", PROMETHEUS_PORT=free_port(),
                   PORTAL_IDLE_INTERVAL="10")  # fmt: skip
    console = tmp_path / "console.txt"
    runner = start_demo(env, console)
    started = []

    def notebook():
        shown = subprocess.run(
            [kubectl(), "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "deployment",
             "notebook", "-n", "vision", "-o", "json"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return json.loads(shown.stdout) if shown.returncode == 0 else None

    try:
        wait_for(lambda: "Press Ctrl-C to stop." in console.read_text(), timeout=180)
        running = wait_for(lambda: (found := notebook()) and found["status"].get("readyReplicas"),
                           timeout=120)  # fmt: skip
        assert running == 1
        first = wait_for(lambda: worker_pid(runner), timeout=30)
        started = list(children(runner.pid))
        os.kill(first, signal.SIGKILL)
        line = wait_for(
            lambda: next((x for x in console.read_text().splitlines() if "restarting" in x), None),
            timeout=30,
        )
        assert "worker killed by SIGKILL; restarting it" in line
        second = wait_for(lambda: (pid := worker_pid(runner)) != first and pid, timeout=60)
        assert runner.poll() is None  # the rest of the demo stayed up

        # The restarted worker runs the idle evaluation: within minutes the notebook
        # (1 minute idle, 2 minutes' grace) is announced, then scaled to zero.
        scaled = wait_for(lambda: (found := notebook())["spec"]["replicas"] == 0 and found,
                          timeout=420, interval=5)  # fmt: skip
        previous = scaled["metadata"]["annotations"]["gpu-portal.io/idle-previous-replicas"]
        assert previous == "1"
        log = idle_log(env, env["PORT"])
        assert ("Deployment", "notebook", "announced") in log
        assert ("Deployment", "notebook", "scaled_to_zero") in log
        started = list(children(runner.pid))

        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C in the terminal
        assert runner.wait(timeout=60) == 0
        assert [pid for pid in [second, *started] if alive(pid)] == []
        # One restart line in all: stopping restarted nothing.
        assert [x for x in console.read_text().splitlines() if "restarting" in x] == [line]
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        for pid in started:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def runners_lines(text):
    """Whether each line of the console is the runner's own: its banner, or a line it
    said ("[demo HH:MM:SS] ..."). A child's output, a log line, is neither."""
    banner = False
    strays = []
    for line in text.splitlines():
        if line.startswith("GPU portal demo is running"):
            banner = True
        if not (banner or line.startswith("[demo ") or not line.strip()):
            strays.append(line)
        if line == "Press Ctrl-C to stop.":
            banner = False
    return strays


def test_the_console_says_when_the_months_figures_are_in_and_nothing_else(tmp_path):
    """With Prometheus scraping kubesim, the runner says once the beat has metered
    every closed hour; what the seeds tell comes as its own lines, their logging
    goes to var/setup.log."""
    env = demo_env(tmp_path, DEMO_PROMETHEUS="live", PROMETHEUS_PORT=free_port(),
                   PORTAL_BILLING_INTERVAL="5")  # fmt: skip
    console = tmp_path / "console.txt"
    runner = start_demo(env, console)
    try:
        line = wait_for(
            lambda: next((x for x in console.read_text().splitlines() if "figures" in x), None),
            timeout=300,
            interval=2,
        )
        assert "billing: the month's figures are in, metered through" in line
        assert f"http://127.0.0.1:{env['PORT']}/billing/" in line
        text = console.read_text()
        assert "Batch window opens at" in text  # seed_batch's word, said by the runner
        assert runners_lines(text) == []
        assert "planned 3 jobs" in (tmp_path / "setup.log").read_text()
        os.killpg(runner.pid, signal.SIGINT)
        assert runner.wait(timeout=60) == 0
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()


def test_the_demo_window_opens_and_its_jobs_run_visible_with_kubectl(tmp_path):
    """The demo's batch window opens a few minutes after it starts; the portal runs
    on kubesim's clock, so moving that clock opens it now. Its Jobs run on the
    simulated cluster and `kubectl get jobs -A` shows them."""
    env = demo_env(
        tmp_path,
        PORTAL_BATCH_TICK_INTERVAL="2",
        PORTAL_BATCH_WATCH_SECONDS="2",
        PORTAL_CLOCK_REFRESH="1",
    )
    kubesim_port = env["KUBESIM_PORT"]
    console = tmp_path / "console.txt"
    runner = start_demo(env, console)

    def jobs():
        listed = subprocess.run(
            [kubectl(), "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "jobs", "-A",
             "-l", "gpu-portal.io/batch-job", "-o", "json"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return json.loads(listed.stdout)["items"]

    def advance(seconds):
        request = urllib.request.Request(
            f"http://127.0.0.1:{kubesim_port}/_sim/clock",
            data=json.dumps({"advance": seconds}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()

    try:
        wait_for(lambda: "Press Ctrl-C to stop." in console.read_text(), timeout=180)
        assert "Batch window opens at" in console.read_text()
        # Planned by the seed: the Jobs wait on the cluster, suspended.
        waiting = wait_for(lambda: len(found := jobs()) == 3 and found, timeout=60)
        assert all(job["spec"]["suspend"] for job in waiting)

        advance(5 * 60)  # past the opening, on kubesim's clock (and so the portal's)

        def all_done():
            found = jobs()
            done = [
                job
                for job in found
                if job["spec"]["suspend"] is False
                and any(c["type"] == "Complete" for c in job["status"].get("conditions") or [])
            ]
            return len(done) == 3 and done

        # A bounded wait for a loaded machine's workers, not a sleep: kubesim's clock
        # moves 15 s a poll, so the pods' 45-90 s pass in a few polls while even 300
        # polls stay inside the window's two hours (a clock run past the close would
        # end the jobs DeadlineExceeded, never Complete, however long the test waited).
        try:
            done = wait_for(all_done, timeout=300, interval=1, every=lambda: advance(15))
        except AssertionError:
            states = [(job["metadata"]["name"], job["spec"]["suspend"], job["status"])
                      for job in jobs()]  # fmt: skip
            raise AssertionError(f"{states}\n{console.read_text()[-3000:]}") from None
        assert {job["metadata"]["namespace"] for job in done} == {"vision", "nlp"}
        table = subprocess.run(
            [kubectl(), "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "jobs", "-A"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
        assert all(job["metadata"]["name"] in table for job in done)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGINT)
            try:
                runner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()


def kubectl():
    return shutil.which("kubectl") or str(ROOT / ".venv/bin/kubectl")


def test_make_demo_cluster_kubernetes_runs_the_demo_on_the_real_control_plane(tmp_path):
    """`make demo CLUSTER=kubernetes`: the same demo on the real control plane. The
    seeded quota is on the API server, the window's Jobs wait there suspended, and
    Ctrl-C stops the control plane with the rest."""
    absent = missing()
    if absent:
        pytest.skip(absent)
    env = demo_env(tmp_path, PORTAL_DEMO_CLUSTER="kubernetes", CLUSTER_PORT=free_port())
    console = tmp_path / "console.txt"
    runner = start_demo(env, console)
    kubeconfig = tmp_path / "cluster" / "kubeconfig"

    def get(*what):
        listed = subprocess.run(
            [kubectl(), "--kubeconfig", str(kubeconfig), "get", *what, "-A", "-o", "json"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return json.loads(listed.stdout)["items"]

    try:
        wait_for(lambda: "Press Ctrl-C to stop." in console.read_text(), timeout=240)
        banner = console.read_text()
        assert (
            f"Kubernetes v1.37.2 with KWOK GPU nodes at https://127.0.0.1:{env['CLUSTER_PORT']}"
            in banner
        )
        quotas = wait_for(lambda: len(found := get("resourcequota")) >= 3 and found, timeout=120)
        assert {q["metadata"]["namespace"] for q in quotas} >= {"vision", "nlp", "speech"}

        # The window's three Jobs (the demo runs other Jobs beside them).
        def window_jobs():
            found = [job for job in get("jobs") if job["metadata"]["name"].startswith("batch-")]
            return len(found) >= 3 and found

        batch = wait_for(window_jobs, timeout=120)
        assert len(batch) == 3 and all(job["spec"]["suspend"] for job in batch)
        # The DRA pool: its slice published at start, no nvidia.com/gpu on its node;
        # vision's quota of the DRA flavor, and its example's claim allocated an H100
        # of the pool by the real scheduler.
        (dra_slice,) = get("resourceslices")
        assert dra_slice["spec"]["nodeName"] == "gpu-h100-dra-0"
        assert len(dra_slice["spec"]["devices"]) == 4
        (node,) = [n for n in get("nodes") if n["metadata"]["name"] == "gpu-h100-dra-0"]
        assert "nvidia.com/gpu" not in node["status"]["allocatable"]
        key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"

        def vision_dra_quota():
            found = [q for q in get("resourcequota") if q["metadata"]["namespace"] == "vision"]
            return [q["spec"]["hard"].get(key) for q in found if q["spec"]["hard"].get(key)]

        assert wait_for(vision_dra_quota, timeout=120) == ["2"]

        def allocated():
            return [
                result
                for claim in get("resourceclaims")
                for result in ((claim.get("status") or {}).get("allocation") or {})
                .get("devices", {})
                .get("results", [])
            ]

        (result,) = wait_for(allocated, timeout=120)
        assert result["pool"] == "gpu-h100-dra-0"
        plane = [pid for pid, cmd in children(runner.pid).items() if "controlplane" in cmd]
        assert len(plane) == 1
        apiservers = [pid for pid, cmd in children(plane[0]).items() if "kube-apiserver" in cmd]
        assert len(apiservers) == 1

        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C in the terminal
        assert runner.wait(timeout=90) == 0
        wait_for(lambda: not alive(apiservers[0]), timeout=30)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
