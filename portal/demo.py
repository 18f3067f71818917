"""`make demo`: the whole portal on one machine with nothing to install.

Migrates and seeds an SQLite database, then runs kubesim (the simulated GPU
cluster), the web server, a Celery worker and Celery beat until Ctrl-C. The
broker is kombu's filesystem transport, so no Redis is needed either.
"""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from billing import demo as billing_demo

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))
WEB_PORT = os.environ.get("PORT", "8000")
KUBESIM_PORT = os.environ.get("KUBESIM_PORT", "8001")
PROMETHEUS_PORT = os.environ.get("PROMETHEUS_PORT", "9090")
KUBECONFIG = VAR_DIR / "kubeconfig"


def manage(*args, **env):
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True, env={**os.environ, **env}
    )


def demo_secret_key():
    """The demo's own key, made once per checkout (production must set one)."""
    path = VAR_DIR / "demo-secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


def main():
    # kombu's filesystem transport wants its folders to exist.
    (VAR_DIR / "broker" / "processed").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DJANGO_SECRET_KEY", demo_secret_key())
    os.environ.setdefault("PORTAL_KUBECONFIG", str(KUBECONFIG))
    os.environ.setdefault("PORTAL_BASE_URL", f"http://127.0.0.1:{WEB_PORT}")
    # Billing's Prometheus (if installed): its settings reach web, worker and beat.
    billing_env, billing_commands, billing_lines = billing_demo.plan(
        VAR_DIR, KUBESIM_PORT, PROMETHEUS_PORT
    )
    for key, value in billing_env.items():
        os.environ.setdefault(key, value)
    manage("migrate", "--noinput", "-v0")
    manage("collectstatic", "--noinput", "-v0")
    # Seeding mails reviewers about the demo requests: keep that off the console.
    manage("seed_demo", EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
    manage("seed_batch")

    celery = [sys.executable, "-m", "celery", "-A", "portal"]
    commands = {
        "kubesim": [
            sys.executable, "-m", "kubesim", "--port", KUBESIM_PORT,
            "--state", str(VAR_DIR / "kubesim-state.json"), "--kubeconfig", str(KUBECONFIG),
            "--dcgm-file-sd", str(VAR_DIR / "dcgm-targets.json"),
        ],
        **billing_commands,
        "web": [sys.executable, "manage.py", "runserver", f"127.0.0.1:{WEB_PORT}", "--noreload"],
        "worker": [*celery, "worker", "--loglevel=INFO", "--concurrency=2"],
        "beat": [*celery, "beat", "--loglevel=INFO",
                 "--schedule", str(VAR_DIR / "celerybeat-schedule")],
    }  # fmt: skip
    KUBECONFIG.unlink(missing_ok=True)  # written afresh once kubesim listens
    processes = {}
    for name, command in commands.items():
        log = open(VAR_DIR / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        processes[name] = subprocess.Popen(command, cwd=BASE_DIR, stdout=log, stderr=log)
        if name == "kubesim":
            _wait_for(KUBECONFIG, processes[name])

    print(
        f"""
GPU portal demo is running.

  Portal      http://127.0.0.1:{WEB_PORT}/
  API docs    http://127.0.0.1:{WEB_PORT}/api/docs/
  Logins      admin / demo  (platform admin, reviews requests)
              alice / demo  (team vision)   carol / demo  (team vision, manager)
              bob / demo    (team nlp)
  Cluster     kubesim at http://127.0.0.1:{KUBESIM_PORT}
              {BASE_DIR / ".venv/bin/kubectl"} --kubeconfig {KUBECONFIG} get resourcequota -A
  Batch       a window opens a few minutes from now: http://127.0.0.1:{WEB_PORT}/batch/
              {BASE_DIR / ".venv/bin/kubectl"} --kubeconfig {KUBECONFIG} get jobs -A
  Logs        {VAR_DIR}/{{web,worker,beat,kubesim}}.log
{chr(10).join(billing_lines)}

Press Ctrl-C to stop.
""",
        flush=True,
    )
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    try:
        while not stop:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"{name} exited with {process.returncode}; see {VAR_DIR}/{name}.log")
                    stop.append(True)
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def _wait_for(path, process, timeout=30):
    deadline = time.monotonic() + timeout
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
