#!/usr/bin/env python3
"""Keep a running `make demo` busy through its API, then check the cluster agrees.

Alice submits requests one after another; the admin approves most of them
(they start at once, so each approval changes the team's quota on the
cluster), revokes the oldest active ones to keep room, and rejects or alice
cancels the rest. Requests end after ten minutes, so beat expires some too.
At the end the team's ResourceQuota in kubesim must equal the sum of its
active requests, as the portal's database has it.

    .venv/bin/python tools/demo_traffic.py --port 8010 --transitions 300

Run from the repository root with the demo's environment (PORTAL_VAR_DIR if
you moved var/): tokens come from `manage.py api_token`, the quota from
`kubectl --kubeconfig var/kubeconfig`. Exit status 0 when every call got an
expected answer (no 5xx, no connection failure) and the cluster agrees.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", ROOT / "var"))
PYTHON = sys.executable
TEAM = "vision"
FLAVORS = ["t4", "l4"]  # both nvidia.com/gpu in the demo catalog: one quota key
KEEP_ACTIVE = 4
# Requests end soon, so the beat's lifecycle sweep expires some meanwhile.
LIFETIME = timedelta(minutes=10)
MARK = "demo traffic"


class Portal:
    def __init__(self, base, tokens):
        self.base, self.tokens = base, tokens
        self.answers = Counter()

    def call(self, method, path, who, body=None):
        headers = {"Accept": "application/json", "Authorization": f"Token {self.tokens[who]}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            self.answers["no answer"] += 1
            print(f"{method} {path}: no answer: {exc}", flush=True)
            return 0, None
        self.answers[f"{status // 100}xx"] += 1
        if status >= 500:
            print(f"{method} {path}: {status} {raw[:300]!r}", flush=True)
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, None


def token(username):
    result = subprocess.run(
        [PYTHON, "manage.py", "api_token", username],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout.strip()


def cluster_quota():
    result = subprocess.run(
        [str(ROOT / ".venv/bin/kubectl"), "--kubeconfig", str(VAR_DIR / "kubeconfig"),
         "get", "resourcequota", "gpu-quota", "-n", TEAM, "-o", "json"],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    hard = json.loads(result.stdout)["spec"]["hard"]
    return {key.removeprefix("requests."): int(value) for key, value in hard.items()}


def ours(portal, status):
    """This script's requests of the team in `status` (oldest first)."""
    path = f"/api/v1/quota-requests/?team={TEAM}&status={status}&limit=1000"
    _, page = portal.call("GET", path, "alice")
    mine = [r for r in (page or {}).get("results", []) if r["justification"].startswith(MARK)]
    return sorted(mine, key=lambda r: r["id"])


def wanted_quota(portal):
    """{resource name: GPUs} of the team's active requests, from the API."""
    wanted, path = Counter(), f"/api/v1/quota-requests/?team={TEAM}&status=active&limit=1000"
    _, page = portal.call("GET", path, "alice")
    for item in (page or {}).get("results", []):
        wanted[item["resource_name"]] += item["gpus"]
    return wanted


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
    parser.add_argument("--transitions", type=int, default=300)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between calls")
    args = parser.parse_args()
    portal = Portal(f"http://127.0.0.1:{args.port}", {u: token(u) for u in ("alice", "admin")})
    done, started, i = Counter(), time.monotonic(), 0
    # What an earlier run left holding quota goes first, so approvals find room.
    active = [item["id"] for item in ours(portal, "approved") + ours(portal, "active")]
    while sum(n for outcome, n in done.items() if outcome.endswith("200")) < args.transitions:
        i += 1
        now = datetime.now(UTC)
        status, created = portal.call("POST", "/api/v1/quota-requests/", "alice", {
            "team": TEAM, "flavor": FLAVORS[i % 2], "gpus": 1 + i % 2,
            "starts_at": now.isoformat(), "ends_at": (now + LIFETIME).isoformat(),
            "justification": f"{MARK} {i}",
        })  # fmt: skip
        done[f"submit -> {status}"] += 1
        if status != 201:
            continue
        pk = created["id"]
        verb, who = (
            [("cancel", "alice"), ("reject", "admin")][i % 2]
            if i % 5 == 0
            else ("approve", "admin")
        )
        status, _ = portal.call("POST", f"/api/v1/quota-requests/{pk}/{verb}/", who, {})
        done[f"{verb} -> {status}"] += 1
        if verb == "approve" and status == 200:
            active.append(pk)
        while len(active) > KEEP_ACTIVE:
            # 409 when the beat's lifecycle sweep expired it first.
            status, _ = portal.call(
                "POST", f"/api/v1/quota-requests/{active.pop(0)}/revoke/", "admin", {}
            )
            done[f"revoke -> {status}"] += 1
        time.sleep(args.pause)
    elapsed = time.monotonic() - started
    changes = sum(n for outcome, n in done.items() if outcome.endswith("200"))
    print(f"{changes} transitions in {elapsed:.0f} s; answers by call: {dict(done)}", flush=True)

    wanted = wanted_quota(portal)
    deadline, seen = time.monotonic() + 120, None
    while time.monotonic() < deadline:
        seen = cluster_quota()
        if (
            seen is not None
            and all(seen.get(k, 0) == v for k, v in wanted.items())
            and all(v == 0 for k, v in seen.items() if k not in wanted)
        ):
            break
        time.sleep(1)
    else:
        print(f"the cluster did not catch up: wanted {dict(wanted)}, has {seen}")
    agrees = seen is not None and {k: v for k, v in seen.items() if v} == dict(wanted)
    print(f"answers: {dict(portal.answers)}; cluster quota {seen}, database says {dict(wanted)}")
    failed = portal.answers["5xx"] or portal.answers["no answer"] or not agrees
    print("FAILED" if failed else "OK: every call answered, the cluster agrees")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
