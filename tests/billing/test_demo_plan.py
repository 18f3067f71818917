"""What `make demo` does for billing, with and without Prometheus on the PATH."""

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from billing import actions, demo
from billing.models import LostRun, TeamUsage
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus
from tests.kubesim.test_prometheus import prometheus_binary  # noqa: F401 - a fixture
from tests.test_demo import free_port
from tests.waiting import stop


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


def test_the_demo_writes_grafana_provisioning_and_says_where(tmp_path):
    """No Grafana here: the demo writes what one provisions from, and prints where."""
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    (tmp_path / demo.HISTORY_LOADED).write_text("")
    _, _, lines, _ = demo.plan(tmp_path, 8001, 9090)
    provisioning = tmp_path / "grafana" / "provisioning"
    assert f"provisioned from {provisioning}" in "\n".join(lines)
    assert f"GF_PATHS_PROVISIONING={provisioning} grafana server" in "\n".join(lines)
    provider = yaml.safe_load((provisioning / "dashboards" / "gpu-portal.yaml").read_text())
    (entry,) = provider["providers"]
    assert entry["type"] == "file"
    dashboard = json.loads((Path(entry["options"]["path"]) / "gpu-idle.json").read_text())
    committed = json.loads(demo.GRAFANA_DASHBOARD.read_text())
    assert dashboard["uid"] == committed["uid"] and dashboard["panels"] == committed["panels"]
    chosen = {v["name"]: v.get("current", {}).get("value") for v in dashboard["templating"]["list"]}
    assert chosen["namespace_label"] == "exported_namespace"
    assert chosen["pod_label"] == "exported_pod"
    sources = yaml.safe_load((provisioning / "datasources" / "gpu-portal.yaml").read_text())
    assert sources["datasources"][0]["url"] == "http://127.0.0.1:9090"
    assert sources["datasources"][0]["type"] == "prometheus"


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
    # A file per day, each removed once it is a block.
    assert not list(tmp_path.glob("history.om*"))
    assert said[0].startswith("history: generating 1 days of GPU samples every 60 s")
    assert said[-1] == f"history: {len(blocks)} blocks in {data}"
    assert said[-2].startswith("history: 100% of 1 days in Prometheus blocks (up to "), said
    # A block per part, parts of 18 h aligned to the epoch: from yesterday's midnight
    # to this hour, two to four.
    metas = [json.loads((block / "meta.json").read_text()) for block in blocks]
    assert 2 <= len(metas) <= 4
    assert all(m["maxTime"] - m["minTime"] <= 18 * 3600 * 1000 for m in metas)
    assert all(m["maxTime"] - m["minTime"] <= 24 * 3600 * 1000 for m in metas)
    # The generated hours are metered at the production step, as every later one.
    if shutil.which("prometheus"):
        env, _, _, _ = demo.plan(tmp_path, 8001, 9090)
        assert "PORTAL_BILLING_STEP" not in env and "PORTAL_BILLING_HISTORY_STEP" not in env


@pytest.mark.prometheus
def test_a_first_demo_holds_metering_until_the_history_is_in_prometheus(
    tmp_path,
    monkeypatch,
    prometheus_binary,  # noqa: F811
):
    """`make demo` answers at once and loads the history in the background: until
    Prometheus has it, the hold file keeps the beat from metering those hours as zero.
    (Three days of it here: the month's minutes take minutes, see docs/benchmarks.md.)"""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    monkeypatch.setattr(demo, "HISTORY_DAYS", 3)
    port = free_port()
    env, commands, lines, background = demo.plan(tmp_path, free_port(), port)
    hold = Path(env["PORTAL_BILLING_HOLD_FILE"])
    assert background is not None and "load in the background" in "\n".join(lines)
    assert hold.read_text().startswith("Loading 3 days of demo history")
    command = [prometheus_binary, *commands["prometheus"][1:]]
    with open(tmp_path / "prometheus.log", "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=log)
    said = []
    try:
        background(said.append)
    finally:
        stop(server)
    assert not hold.exists(), said
    assert (tmp_path / demo.HISTORY_LOADED).exists(), said
    assert said[-1].startswith("history: 3 days from") and "the beat meters them now" in said[-1]
    assert any("of 3 days in Prometheus blocks" in line for line in said), said
    # (How long it takes is docs/benchmarks.md's: a bound here failed on a busy machine.)


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


def demo_history(directory, start, end, step=demo.HISTORY_STEP):
    """kubesim's history of the demo workload from `start` to `end` as the demo makes
    it (at `step`): (the exact answer's rows, the OpenMetrics text)."""
    days = (end - start).days + 1
    workload = directory / "workload.json"
    workload.write_text(json.dumps(demo.demo_workload(days, start, end)))
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    subprocess.run(
        [sys.executable, "-m", "kubesim", "history", "--cluster", str(demo.DEMO_CLUSTER),
         "--workload", str(workload), "--from", start.strftime(stamp),
         "--to", end.strftime(stamp), "--out", str(directory / "h.om"),
         "--step", f"{step}s", "--metrics", demo.HISTORY_METRICS],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    rows = json.loads((directory / "h.answer.json").read_text())["rows"]
    return rows, (directory / "h.om").read_text()


@pytest.fixture(scope="module")
def two_weeks(tmp_path_factory):
    """Two weeks of the demo's history from a Wednesday, sampled every half hour: the
    habits and incidents are the workload's, at any step (the demo's minutes would be
    3 GB of text here)."""
    start, end = datetime(2026, 11, 4, tzinfo=UTC), datetime(2026, 11, 18, tzinfo=UTC)
    return demo_history(tmp_path_factory.mktemp("demo-history"), start, end, step=1800)


def test_the_demo_teams_have_habits_of_their_own(two_weeks):
    """vision keeps its H100s busy; nlp's A100 notebooks idle through nights and
    weekends (as the exact answer of kubesim's history for two weeks says)."""
    rows, _ = two_weeks

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


def test_the_demo_month_has_xids_and_spot_reclaims(two_weeks):
    """A month of a real cluster: an ECC error kills a training run mid-month, spot
    reclaims take an L4 node from under nlp's evaluation, and the last day has XIDs
    for the GPU health page."""
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, 9, tzinfo=UTC)
    incidents = demo.demo_workload(31, start, end)["incidents"]
    assert sorted(i["xid"] for i in incidents if "xid" in i) == [13, 48, 79]
    assert [i["reclaim"] for i in incidents if "reclaim" in i] == ["gpu-l4-0", "gpu-l4-1"]
    last_day = [i for i in incidents if "xid" in i and int(i["at"][1:-1]) >= (30 * 24 - 15) * 60]
    assert {i["xid"] for i in last_day} == {13, 79}

    rows, text = two_weeks

    def held(namespace, job):
        """{(MM-DDTHH, node): minutes} of one Job's pod."""
        return {
            (r["hour"][5:13], r["node"]): r["held_minutes"]
            for r in rows
            if (r["namespace"], r["job"]) == (namespace, job)
        }

    # Wednesday 11 Nov, 11:10: a double-bit ECC error (XID 48) under vision's run.
    train = held("vision", "train-7")
    assert max(train) == ("11-11T11", "gpu-h100-0") and train[max(train)] == 30
    assert max(held("vision", "train-8"))[0] == "11-12T17"  # the next day's runs whole
    # Friday 13 Nov, 14:00: the cloud takes gpu-l4-0 back from nlp's evaluation.
    assert max(held("nlp", "eval-9")) == ("11-13T13", "gpu-l4-0")
    assert set(node for _, node in held("nlp", "eval-10")) == {"gpu-l4-1"}
    assert 'node="gpu-l4-3"' in text  # the replacement joined later
    for code in ("48", "13", "79"):
        assert f'err_code="{code}"' in text


@pytest.mark.prometheus
def test_the_gpu_health_page_shows_the_demo_historys_xids(tmp_path, client, admin_user, settings):
    """The first `make demo`'s history, in Prometheus: the GPU health page has the
    last day's XIDs, with what to do about each."""
    require_prometheus()
    demo.load_history(sys.executable, tmp_path, tmp_path / "data", days=1, progress=print)
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    with running_prometheus(tmp_path) as url:
        settings.PORTAL_PROMETHEUS_URL = url
        client.force_login(admin_user)
        page = client.get("/billing/health/").content.decode()
    rows = page.split('id="xid"')[1].split("</tbody>")[0]
    assert "No XID errors" not in rows
    assert "gpu-a100-0" in rows and "GPU has fallen off the bus" in rows
    assert "kubectl drain gpu-a100-0 --ignore-daemonsets" in rows
    assert "gpu-h100-0" in rows and "Graphics engine exception" in rows
    assert "Watch: usually the application" in rows


@pytest.mark.prometheus
def test_the_run_the_demos_ecc_error_killed_is_credited(tmp_path, settings, catalog, vision, nlp):
    """Metered from the demo history as the demo meters it: vision's run on the GPU
    that reported XID 48 at 11:10 (its pod fails 30 s later) is credited for the time
    it ran, 08:00 to the end of the 11:10 sample, on its 4 GPUs, each hour what it
    charged, an hour metered after the loss was found too. (A day's history has
    its XID 48 on its first day: the middle of one.)"""
    require_prometheus()
    start, end = datetime(2026, 11, 11, tzinfo=UTC), datetime(2026, 11, 11, 13, tzinfo=UTC)
    _, text = demo_history(tmp_path, start, end)
    load_openmetrics(text, tmp_path)
    settings.PORTAL_BILLING_STEP = demo.HISTORY_STEP
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    hour = datetime(2026, 11, 11, 11, tzinfo=UTC)
    with running_prometheus(tmp_path) as url:
        settings.PORTAL_PROMETHEUS_URL = url
        assert actions.ingest_hour(hour) is True
        assert actions.ingest_hour(hour - timedelta(hours=1)) is True
    (run,) = LostRun.objects.filter(team=vision)
    assert (run.started, run.ended, run.gpus) == (hour.replace(hour=8), hour.replace(minute=11), 4)
    row = TeamUsage.objects.get(hour=hour, team=vision, flavor=catalog["h100"])
    assert row.allocated_seconds == 4 * 11 * 60  # the samples 11:00 to 11:10; then it was gone
    assert row.lost_seconds == row.allocated_seconds
    earlier = TeamUsage.objects.get(hour=hour.replace(hour=10), team=vision, flavor=catalog["h100"])
    assert earlier.lost_seconds == 4 * 3600


def test_history_an_older_demo_loaded_keeps_its_half_hour_step(tmp_path):
    """An older demo loaded its history every 30 minutes and wrote where it ends:
    those hours are still metered at their step until `make clean`."""
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    (tmp_path / demo.HISTORY_LOADED).write_text("")
    (tmp_path / "history-end").write_text("2026-12-01T09:00:00+00:00")
    env, _, _, _ = demo.plan(tmp_path, 8001, 9090)
    assert env["PORTAL_BILLING_HISTORY_STEP"] == "1800"
    assert env["PORTAL_BILLING_HISTORY_END"] == "2026-12-01T09:00:00+00:00"
