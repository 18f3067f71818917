"""python -m kubesim history: OpenMetrics that promtool loads and Prometheus answers
from, the exact answer beside it, and clear errors for bad input."""

import calendar
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim import promtext
from tests.kubesim.simhelpers import Clients, pod, wait_for
from tests.kubesim.test_prometheus import free_port, prometheus_binary  # noqa: F401
from tests.waiting import stop

HOUR = 3600
# Hours in the recent past: Prometheus keeps (and answers for) 15 days by default.
START = (int(time.time()) // HOUR - 6) * HOUR
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

WORKLOAD = {
    "threshold": 0.05,
    "namespaces": [
        {"name": "team-vision", "team": "vision", "quota": {"requests.nvidia.com/gpu": "4"}},
        {"name": "team-nlp", "team": "nlp"},
    ],
    "workloads": [
        # 90 minutes on 2 H100s at 80 %, from 00:10.
        {
            "namespace": "team-vision",
            "name": "train",
            "kind": "Job",
            "gpus": 2,
            "nodeSelector": H100,
            "start": "+10m",
            "duration": "90m",
            "profile": "constant",
            "util": 80,
            "fbUsed": 30000,
        },
        # A notebook busy for its first hour, then idle.
        {
            "namespace": "team-nlp",
            "name": "notebook",
            "resource": "nvidia.com/mig-1g.10gb",
            "duration": "3h",
            "profile": "idle-after",
            "util": 60,
            "idleAfter": "1h",
        },
        {
            "namespace": "team-nlp",
            "name": "nightly",
            "start": "+1h",
            "duration": "20m",
            "repeat": {"every": "1h", "count": 3},
        },
    ],
    # The H100 node's exporter was down for ten minutes.
    "scrapeGaps": [{"from": "+30m", "to": "+40m", "job": "dcgm", "node": "gpu-h100-0"}],
}


def run_history(tmp_path, workload=WORKLOAD, *extra, hours=4, cluster=SMALL_CLUSTER):
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload))
    command = [
        sys.executable, "-m", "kubesim", "history",
        "--cluster", cluster,
        "--workload", str(path),
        "--from", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START)),
        "--to", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + hours * HOUR)),
        "--out", str(tmp_path / "history.om"),
        *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("history")
    result = run_history(tmp_path)
    assert result.returncode == 0, result.stderr
    answer = json.loads((tmp_path / "history.answer.json").read_text())
    return tmp_path, (tmp_path / "history.om").read_text(), answer


def rows_of(answer, **match):
    return [r for r in answer["rows"] if all(r[k] == v for k, v in match.items())]


def hour(n):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + n * HOUR))


def test_the_answer_counts_gpu_minutes_per_pod_and_hour(generated):
    _, _, answer = generated
    assert answer["threshold"] == 0.05 and answer["step_seconds"] == 60
    (first,) = rows_of(answer, hour=hour(0), namespace="team-vision")
    assert first["pod"].startswith("train-") and first["job"] == "train"
    assert (first["gpus"], first["held_minutes"], first["gpu_minutes"]) == (2, 50, 100)
    # 10 minutes x 2 GPUs fell into the exporter's gap.
    assert (first["busy_gpu_minutes"], first["idle_gpu_minutes"]) == (80, 0)
    assert first["unobserved_gpu_minutes"] == 20
    assert first["mean_utilisation"] == 0.8 and first["peak_fb_used_mib"] == 30000
    (second,) = rows_of(answer, hour=hour(1), namespace="team-vision")
    assert (second["held_minutes"], second["busy_gpu_minutes"]) == (40, 80)
    assert not rows_of(answer, hour=hour(2), namespace="team-vision")

    notebook = {r["hour"]: r for r in rows_of(answer, pod="notebook")}
    assert notebook[hour(0)]["busy_gpu_minutes"] == 60
    assert notebook[hour(1)]["idle_gpu_minutes"] == 60
    assert notebook[hour(1)]["mean_utilisation"] == 0
    assert notebook[hour(0)]["resource"] == "nvidia.com/mig-1g.10gb"
    assert {r["pod"] for r in rows_of(answer, namespace="team-nlp")} == {
        "notebook", "nightly-0", "nightly-1", "nightly-2",
    }  # fmt: skip


def test_the_file_is_openmetrics_with_families_in_one_piece(generated):
    _, text, _ = generated
    assert text.endswith("\n# EOF\n")
    seen, current, last_time = set(), None, {}
    for line in text.splitlines()[:-1]:
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in seen, f"{name} split in two"
            assert kind in ("gauge", "unknown")
            seen.add(name)
            current = name
            continue
        if line.startswith("#"):
            continue
        key, value, stamp = line.rsplit(" ", 2)
        assert key.split("{", 1)[0] == current
        float(value)
        assert int(stamp) > last_time.get(key, 0), f"out of order: {line}"
        last_time[key] = int(stamp)
    assert {"kube_pod_container_resource_requests", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} <= seen


def test_split_writes_a_whole_file_per_part_aligned_to_the_epoch(tmp_path, generated):
    """--split 90m: a file per 90 minutes from the epoch (as promtool aligns its
    blocks), each OpenMetrics on its own, announced on stdout when written, and
    together the very samples of the single file."""
    _, whole, _ = generated
    result = run_history(tmp_path, WORKLOAD, "--split", "90m")
    assert result.returncode == 0, result.stderr
    *announced, summary = [json.loads(line) for line in result.stdout.splitlines()]
    paths = [a["written"] for a in announced]
    assert paths == summary["files"]
    assert paths == [str(tmp_path / f"history.om.{i:03d}") for i in range(len(paths))]
    assert not (tmp_path / "history.om").exists()
    samples = []
    for entry in announced:
        text = (tmp_path / os.path.basename(entry["written"])).read_text()
        assert text.endswith("\n# EOF\n") and text.count("# EOF") == 1
        until = calendar.timegm(time.strptime(entry["until"], "%Y-%m-%dT%H:%M:%SZ"))
        assert until % 5400 == 0  # a multiple of 90 minutes since the epoch
        stamps = [int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[0] != "#"]
        assert max(stamps) < until and min(stamps) >= until - 5400
        samples += [line for line in text.splitlines() if line[0] != "#"]
    assert len(announced) >= 3  # four hours from a whole hour: three or four parts
    assert sorted(samples) == sorted(line for line in whole.splitlines() if line[0] != "#")
    assert summary["samples"] == len(samples)


def test_history_has_the_series_the_live_endpoints_serve(generated):
    _, text, _ = generated
    history_labels = {}
    for line in text.splitlines():
        match = promtext.SAMPLE.match(line.rsplit(" ", 1)[0]) if not line.startswith("#") else None
        if match:
            names = [k for k, _ in promtext.LABEL.findall(match.group(2) or "")]
            history_labels.setdefault(match.group(1), set()).add(tuple(names))
    with running_kubesim(SMALL_CLUSTER) as sim:
        k = Clients(sim)
        ns = k.namespace()
        manifest = pod("live", 2, {"kubesim.io/duration": "1h"}, node_selector=H100)
        manifest["metadata"]["labels"] = {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "gpu-portal.io/team": "vision",
        }
        k.core.create_namespaced_pod(ns, manifest)
        wait_for(lambda: k.core.read_namespaced_pod("live", ns).status.phase == "Running")
        _, ksm_samples = promtext.scrape(f"{sim.url}/metrics/kube-state-metrics")
        _, dcgm_samples = promtext.scrape(f"{sim.url}/metrics/dcgm/gpu-h100-0")
    for name, labels, _ in ksm_samples:
        if name.startswith(("kube_pod_", "kube_job_", "kube_node_status_allocatable")):
            assert tuple(labels) + ("job", "instance") in history_labels[name], name
    for name, labels, _ in dcgm_samples:
        # Scraped through file_sd without honor_labels, as docs/kubesim.md configures.
        stored = tuple(
            "exported_" + k if k in ("namespace", "pod", "container") else k for k in labels
        )
        stored += ("job", "instance", "node", "namespace", "pod", "container")
        assert stored in history_labels[name], (name, stored)


def test_promtool_loads_it_and_prometheus_answers_per_namespace(generated, prometheus_binary):  # noqa: F811
    tmp_path, _, answer = generated
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    data = tmp_path / "data"
    command = [promtool, "tsdb", "create-blocks-from", "openmetrics"]
    command += [str(tmp_path / "history.om"), str(data)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1m}\n")
    process = subprocess.Popen(
        [
            prometheus_binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def query(promql, at):
            url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at})
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return json.loads(response.read())["data"]["result"]
            except OSError:
                assert process.poll() is None, "prometheus exited"
                return None

        # Hour h is [h, h+1h): a range vector evaluated 1 s before its end covers it
        # (ranges are left-open), over raw samples (backfill has no staleness markers).
        end_of_hour0 = START + HOUR - 1
        observed = (
            "sum by (exported_namespace) "
            '(count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace!=""}[1h]))'
        )
        result = wait_for(lambda: query(observed, end_of_hour0), timeout=30, interval=0.2)
        by_namespace = {r["metric"]["exported_namespace"]: float(r["value"][1]) for r in result}
        expected = {}
        for row in rows_of(answer, hour=hour(0)):
            minutes = row["gpu_minutes"] - row["unobserved_gpu_minutes"]
            expected[row["namespace"]] = expected.get(row["namespace"], 0) + minutes
        assert by_namespace == expected == {"team-vision": 80, "team-nlp": 60}

        (train,) = rows_of(answer, hour=hour(1), namespace="team-vision")
        selector = f'{{exported_pod="{train["pod"]}"}}'
        at = START + 2 * HOUR - 1
        (mean,) = query(f"avg(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{selector}[1h]))", at)
        (peak,) = query(f"max(max_over_time(DCGM_FI_DEV_FB_USED{selector}[1h]))", at)
        assert float(mean["value"][1]) == pytest.approx(train["mean_utilisation"])
        assert float(peak["value"][1]) == train["peak_fb_used_mib"]
        # Allocation from kube-state-metrics: GPU-minutes requested while Running, per
        # namespace (one sample a minute, phase 0 or 1).
        held = (
            'sum by (namespace) (sum_over_time(kube_pod_status_phase{phase="Running"}[1h])'
            " * on (namespace, pod) group_left () sum by (namespace, pod) "
            '(max_over_time(kube_pod_container_resource_requests{resource="nvidia_com_gpu"}[1h])))'
        )
        running = {r["metric"]["namespace"]: float(r["value"][1]) for r in query(held, at)}
        assert running["team-vision"] == train["gpu_minutes"] == 80
    finally:
        stop(process)


def test_csv_answer_and_metric_filter(tmp_path):
    families = "kube_pod_.*|DCGM_FI_DEV_FB_USED"
    answer = str(tmp_path / "a.csv")
    result = run_history(tmp_path, WORKLOAD, "--answer", answer, "--metrics", families)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((tmp_path / "a.csv").open()))
    (first,) = [r for r in rows if r["namespace"] == "team-vision" and r["hour"] == hour(0)]
    assert first["held_minutes"] == "50" and first["gpus"] == "2"
    families = set(re.findall(r"^# TYPE (\S+)", (tmp_path / "history.om").read_text(), re.M))
    assert "DCGM_FI_DEV_FB_USED" in families and "kube_pod_info" in families
    assert "DCGM_FI_DEV_GPU_UTIL" not in families and "kube_node_labels" not in families


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workloads": [{"namespace": "nope", "name": "x", "duration": "1h"}]},
         "workloads[0].namespace: 'nope' is not in namespaces"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x", "duration": "soon"}]},
         "workloads[0].duration: expected a duration like 90s, 5m or 1h, got 'soon'"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x\x00y", "duration": "1h"}]},
         "workloads[0].name: must be a DNS-1123 label"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x", "duration": "1h", "gpus": 10**30}]},
         "workloads[0].gpus: expected a whole number 1-64"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x", "duration": "1h", "start": "+30d"}]},
         "workloads[0].start: must fall within --from/--to"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x", "duration": "1h", "util": 101}]},
         "workloads[0].util: a percentage 0-100"),
        ({"workloads": [{"namespace": "team-nlp", "name": "x", "duration": "1h",
                         "busyHours": "9-5"}]},
         "workloads[0].busyHours: busy hours must look like 09:00-17:00"),
        ({"threshold": "high"}, "threshold: expected a ratio 0-1"),
        ({"scrapeGaps": [{"from": "+2h", "to": "+1h"}]}, "scrapeGaps[0]: to must be after from"),
        ({"incidents": [{"at": "+1h", "node": "gpu-h100-0"}]},
         "incidents[0]: expected {at, xid, node, gpu} or {at, reclaim: NODE}"),
        ({"incidents": [{"at": "+1h", "xid": 79, "node": "gpu-h100-0"}]},
         "incidents[0].gpu: expected a whole number 0-63, got None"),
        ({"incidents": [{"at": "+9h", "xid": 79, "node": "gpu-h100-0", "gpu": 0}]},
         "incidents[0].at: must fall within --from/--to"),
        ({"incidents": [{"at": "+1h", "xid": 79, "node": "gpu-h100-0", "gpu": 5}]},
         "incidents[0].gpu: node 'gpu-h100-0' has no GPU 5"),
        ({"incidents": [{"at": "+1h", "xid": 79, "node": "gpu-h200-0", "gpu": 0}]},
         "incidents[0]: node 'gpu-h200-0' is not in the cluster at"),
        ({"incidents": [{"at": "+1h", "reclaim": "gpu-h100-0"}]},
         "incidents[0].reclaim: 'gpu-h100-0' is not a spot node"),
        ({"incidents": [{"at": "+1h", "reclaim": "gpu-l4-0"},
                        {"at": "+2h", "xid": 13, "node": "gpu-l4-0", "gpu": 0}]},
         "incidents[1]: node 'gpu-l4-0' was reclaimed before the cluster at"),
        ({"incidents": [{"at": "+1h", "reclaim": "gpu-l4-0", "returnsAfter": "later"}]},
         "incidents[0].returnsAfter: expected a duration like 90s, 5m or 1h, got 'later'"),
    ],
)  # fmt: skip
def test_bad_workloads_are_refused_with_the_field_named(tmp_path, change, message):
    workload = {**WORKLOAD, "workloads": [], **change}
    result = run_history(tmp_path, workload)
    assert result.returncode == 2
    assert message in result.stderr
    assert os.listdir(tmp_path) == ["workload.yaml"]  # nothing half-written


def test_bad_options_are_refused(tmp_path):
    result = run_history(tmp_path, WORKLOAD, "--step", "0s")
    assert result.returncode == 2 and "--step: must be between 1s" in result.stderr
    result = run_history(tmp_path, WORKLOAD, hours=0)
    assert result.returncode == 2 and "--to must be after --from" in result.stderr
    answer = str(tmp_path / "missing" / "answer.json")
    result = run_history(tmp_path, WORKLOAD, "--answer", answer)
    assert result.returncode == 2
    assert f"No such file or directory: {answer}.tmp" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["workload.yaml"]  # no output, no spools
    (tmp_path / "workload.yaml").write_text("[deep: {nesting" * 50)
    command = [sys.executable, "-m", "kubesim", "history", "--cluster", SMALL_CLUSTER,
               "--workload", str(tmp_path / "workload.yaml"), "--from", "2026-01-01",
               "--to", "2026-01-02", "--out", str(tmp_path / "x.om")]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "workload file: not YAML or JSON" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["workload.yaml"]


def test_pods_sharing_a_time_sliced_gpu_each_see_the_whole_gpu(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "nodePools: [{name: t4, namePrefix: gpu-t4, gpu: {model: T4, count: 1, replicas: 4}}]\n"
    )
    workload = {
        "namespaces": [{"name": "team-a", "team": "a"}, {"name": "team-b", "team": "b"}],
        "workloads": [
            {"namespace": "team-a", "name": "light", "duration": "2h", "profile": "constant",
             "util": 3, "gpus": 2},
            {"namespace": "team-b", "name": "heavy", "start": "+30m", "duration": "1h",
             "profile": "constant", "util": 50},
        ],
    }  # fmt: skip
    result = run_history(tmp_path, workload, hours=2, cluster=str(cluster))
    assert result.returncode == 0, result.stderr
    answer = json.loads((tmp_path / "history.answer.json").read_text())
    light = {r["hour"]: r for r in rows_of(answer, pod="light")}
    # Alone at 3 % (two replicas of the one GPU): idle; busy once the other pod's load
    # is on the same GPU (the exporter reports the device, not the pod).
    assert light[hour(0)]["gpus"] == 2 and light[hour(0)]["gpu_minutes"] == 120
    assert light[hour(0)]["idle_gpu_minutes"] == 60 and light[hour(0)]["busy_gpu_minutes"] == 60
    (heavy,) = rows_of(answer, pod="heavy", hour=hour(0))
    assert heavy["mean_utilisation"] == 0.53
    text = (tmp_path / "history.om").read_text()
    at = START + 45 * 60
    rows = [
        line
        for line in text.splitlines()
        if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and line.endswith(f" {at}")
    ]
    assert len(rows) == 2  # one GPU, copied to both pods
    assert {re.search(r'exported_pod="(\w+)"', r).group(1) for r in rows} == {"light", "heavy"}


def test_xids_and_spot_reclaims_happen_as_on_the_live_cluster(tmp_path):
    """An XID crashes the pod on that GPU (the exporter shows the code on it first)
    and takes the GPU out of service; a spot reclaim evicts the node's pods, the node
    goes and a new one (a new name) joins later."""
    l4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    workload = {
        "namespaces": [{"name": "team-vision", "team": "vision"}],
        "workloads": [
            {"namespace": "team-vision", "name": "train", "kind": "Job", "nodeSelector": H100,
             "duration": "3h", "profile": "constant", "util": 80},
            {"namespace": "team-vision", "name": "eval", "nodeSelector": l4, "duration": "3h"},
            # Both H100s, after one of them failed: never placed.
            {"namespace": "team-vision", "name": "wide", "gpus": 2, "nodeSelector": H100,
             "start": "+2h", "duration": "1h"},
            {"namespace": "team-vision", "name": "late", "nodeSelector": l4, "start": "+2h",
             "duration": "30m"},
        ],
        "incidents": [
            {"at": "+1h30m", "xid": 79, "node": "gpu-h100-0", "gpu": 0},
            {"at": "+1h", "reclaim": "gpu-l4-0", "returnsAfter": "30m"},
        ],
    }  # fmt: skip
    result = run_history(tmp_path, workload)
    assert result.returncode == 0, result.stderr
    answer = json.loads((tmp_path / "history.answer.json").read_text())
    held = {
        (r["hour"], r["pod"].split("-")[0], r["node"]): r["held_minutes"] for r in answer["rows"]
    }
    assert held == {
        (hour(0), "eval", "gpu-l4-0"): 60,  # evicted at +1h
        (hour(0), "train", "gpu-h100-0"): 60,
        (hour(1), "train", "gpu-h100-0"): 31,  # the XID's scrape at +1h30m still sees it
        (hour(2), "late", "gpu-l4-1"): 30,  # on the node that replaced gpu-l4-0
    }

    samples = {}  # (family, labels) -> {seconds after START: value}
    for line in (tmp_path / "history.om").read_text().splitlines():
        if not line.startswith("#"):
            key, value, stamp = line.rsplit(" ", 2)
            samples.setdefault(key, {})[int(stamp) - START] = float(value)

    def series(family, **labels):
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        found = [k for k in samples if k.startswith(family + "{") and all(w in k for w in wanted)]
        return {key: samples[key] for key in found}

    xid79 = series("DCGM_FI_DEV_XID_ERRORS", Hostname="gpu-h100-0", gpu="0", err_code="79")
    (on_pod,) = [points for key, points in xid79.items() if "exported_pod=" in key]
    assert on_pod == {90 * 60: 79}  # one scrape names the pod hit, then it is gone
    (after,) = [points for key, points in xid79.items() if "exported_pod=" not in key]
    assert min(after) == 91 * 60 and set(after.values()) == {79}
    (allocatable,) = series(
        "kube_node_status_allocatable", node="gpu-h100-0", resource="nvidia_com_gpu"
    ).values()
    assert allocatable[89 * 60] == 2 and allocatable[90 * 60] == 1
    (wide,) = series("kube_pod_status_phase", pod="wide", phase="Pending").values()
    assert set(wide.values()) == {1}

    (evicted,) = series("kube_pod_status_phase", pod="eval", phase="Failed").values()
    # Failed at the notice, then deleted, as an eviction does.
    assert [t for t, value in evicted.items() if value] == [60 * 60] == [max(evicted)]
    (old,) = series(
        "kube_node_status_allocatable", node="gpu-l4-0", resource="nvidia_com_gpu"
    ).values()
    assert max(old) == 61 * 60  # gone two minutes after the notice
    (new,) = series(
        "kube_node_status_allocatable", node="gpu-l4-1", resource="nvidia_com_gpu"
    ).values()
    assert min(new) == 92 * 60  # joined 30 minutes after
    assert series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", Hostname="gpu-l4-1", exported_pod="late")
