"""What `make demo` does for billing, with and without Prometheus on the PATH."""

import json
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from billing import demo
from tests.kubesim.test_prometheus import prometheus_binary  # noqa: F401 - a fixture
from tests.test_demo import free_port


def test_without_prometheus_the_demo_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed there
    env, commands, lines, background = demo.plan(tmp_path, 8001, 9090)
    assert env == {"PORTAL_PROMETHEUS_URL": ""} and commands == {} and background is None
    assert "apt-get install prometheus" in "\n".join(lines)


def test_with_prometheus_the_demo_scrapes_kubesim_as_an_operator_would(tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    (tmp_path / demo.HISTORY_LOADED).write_text("")  # history already in: not loaded again
    env, commands, lines, background = demo.plan(tmp_path, 8001, 9090)
    assert background is None
    assert env["PORTAL_PROMETHEUS_URL"] == "http://127.0.0.1:9090"
    assert env["PORTAL_BILLING_LABEL_POD"] == "exported_pod"
    config = (tmp_path / "prometheus.yml").read_text()
    assert "file_sd_configs" in config and "/metrics/kube-state-metrics" in config
    assert commands["prometheus"][0].endswith("prometheus")
    assert "Prometheus at http://127.0.0.1:9090/" in lines[0] and "PROMETHEUS_PORT=9090" in lines[0]
    assert "scraping kubesim" in lines[1]
    assert env["PORTAL_BILLING_HOLD_FILE"] == str(tmp_path / "history-loading")
    assert not (tmp_path / "history-loading").exists()  # nothing held: metering goes on
    # Live hours at the production step; no history loaded, no history step.
    assert "PORTAL_BILLING_STEP" not in env and "PORTAL_BILLING_HISTORY_STEP" not in env


def test_the_demo_history_loads_into_prometheus_blocks(tmp_path):
    """The first `make demo` with Prometheus generates history and loads it with promtool."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    data = tmp_path / "prometheus"
    said = []
    demo.load_history(sys.executable, tmp_path, data, days=1, progress=said.append)
    blocks = [path for path in data.iterdir() if (path / "meta.json").is_file()]
    assert blocks, f"no TSDB block under {data}: {list(data.iterdir())}"
    assert sorted(data.iterdir()) == sorted(blocks)  # only whole blocks were moved in
    assert not (tmp_path / "history.om").exists()  # the OpenMetrics file is removed once loaded
    assert [line[-5:] for line in said] == ["(1/3)", "(2/3)", "(3/3)"]
    # Its hours are metered at its own step, every later one at the production step.
    if shutil.which("prometheus"):
        env, _, _, _ = demo.plan(tmp_path, 8001, 9090)
        assert env["PORTAL_BILLING_HISTORY_STEP"] == "1800"
        assert env["PORTAL_BILLING_HISTORY_END"] == (tmp_path / "history-end").read_text()
        assert "PORTAL_BILLING_STEP" not in env


@pytest.mark.prometheus
def test_a_first_demo_holds_metering_until_the_history_is_in_prometheus(
    tmp_path,
    prometheus_binary,  # noqa: F811
):
    """`make demo` answers at once and loads the history in the background: until
    Prometheus has it, the hold file keeps the beat from metering those hours as zero."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    port = free_port()
    env, commands, lines, background = demo.plan(tmp_path, free_port(), port)
    hold = Path(env["PORTAL_BILLING_HOLD_FILE"])
    assert background is not None and "load in the background" in "\n".join(lines)
    assert hold.read_text().startswith("Loading 30 days of demo history")
    command = [prometheus_binary, *commands["prometheus"][1:]]
    with open(tmp_path / "prometheus.log", "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=log)
    said = []
    try:
        began = time.monotonic()
        background(said.append)
        took = time.monotonic() - began
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert not hold.exists(), said
    assert (tmp_path / demo.HISTORY_LOADED).exists(), said
    assert said[-1].startswith("history: 30 days from") and "the beat meters them now" in said[-1]
    # Was about six minutes (promtool at 2-hour blocks); generation, blocks and
    # Prometheus' next look at its directory (once a minute) now fit in two.
    assert took < 120, said


@pytest.mark.parametrize("days", [1, 2, 3, 4, 5, 6, 7])
def test_a_short_history_starting_any_day_of_the_week_is_valid(tmp_path, days):
    """Whatever day the demo starts on, every workload starts within the period."""
    for weekday in range(7):
        start = datetime(2026, 11, 2 + weekday, tzinfo=UTC)
        end = start + timedelta(days=days, hours=5)
        found = demo.demo_workload(days + 1, start, end)["workloads"]
        starts = [int(w["start"][1:-1]) for w in found]
        assert all(0 <= hours < (end - start).total_seconds() / 3600 for hours in starts)
        assert {w["name"] for w in found} >= {"train", "finetune", "eval"}


def test_the_demo_teams_have_habits_of_their_own(tmp_path):
    """vision keeps its H100s busy; nlp's A100 notebooks idle through nights and
    weekends (as the exact answer of kubesim's history for two weeks says)."""
    start, end = datetime(2026, 11, 4, tzinfo=UTC), datetime(2026, 11, 18, tzinfo=UTC)  # Weds
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(demo.demo_workload(15, start, end)))
    subprocess.run(
        [sys.executable, "-m", "kubesim", "history", "--cluster", str(demo.DEMO_CLUSTER),
         "--workload", str(workload), "--from", "2026-11-04T00:00:00Z",
         "--to", "2026-11-18T00:00:00Z", "--out", str(tmp_path / "h.om"),
         "--step", "1800s", "--metrics", demo.HISTORY_METRICS],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    rows = json.loads((tmp_path / "h.answer.json").read_text())["rows"]

    def idle_share(rows):
        busy = sum(r["busy_gpu_minutes"] for r in rows)
        idle = sum(r["idle_gpu_minutes"] for r in rows)
        return idle / (busy + idle)

    train = [r for r in rows if r["namespace"] == "vision" and r["pod"].startswith("train-")]
    notebooks = [r for r in rows if r["namespace"] == "nlp" and r["pod"].startswith("notebook")]
    assert train and idle_share(train) < 0.05
    assert idle_share(notebooks) > 0.6

    def at(row):
        return datetime.fromisoformat(row["hour"].replace("Z", "+00:00"))

    weekend = [r for r in notebooks if at(r).weekday() >= 5]
    nights = [r for r in notebooks if at(r).weekday() < 5 and not 9 <= at(r).hour < 18]
    days = [r for r in notebooks if at(r).weekday() < 5 and 10 <= at(r).hour < 17]
    assert weekend and idle_share(weekend) == 1
    assert nights and idle_share(nights) > 0.9
    assert days and idle_share(days) == 0
