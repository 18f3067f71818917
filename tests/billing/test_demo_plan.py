"""What `make demo` does for billing, with and without Prometheus on the PATH."""

import shutil
import sys

import pytest

from billing import demo


def test_without_prometheus_the_demo_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed there
    env, commands, lines = demo.plan(tmp_path, 8001, 9090)
    assert env == {"PORTAL_PROMETHEUS_URL": ""} and commands == {}
    assert "apt-get install prometheus" in "\n".join(lines)


def test_with_prometheus_the_demo_scrapes_kubesim_as_an_operator_would(tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    (tmp_path / "prometheus").mkdir()  # history already loaded: not generated again
    env, commands, lines = demo.plan(tmp_path, 8001, 9090)
    assert env["PORTAL_PROMETHEUS_URL"] == "http://127.0.0.1:9090"
    assert env["PORTAL_BILLING_LABEL_POD"] == "exported_pod"
    config = (tmp_path / "prometheus.yml").read_text()
    assert "file_sd_configs" in config and "/metrics/kube-state-metrics" in config
    assert commands["prometheus"][0].endswith("prometheus")
    assert "scraping kubesim" in lines[0]
    # Live hours at the production step; no history loaded, no history step.
    assert "PORTAL_BILLING_STEP" not in env and "PORTAL_BILLING_HISTORY_STEP" not in env


def test_the_demo_history_loads_into_prometheus_blocks(tmp_path):
    """The first `make demo` with Prometheus generates history and loads it with promtool."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    data = tmp_path / "prometheus"
    demo.load_history(sys.executable, tmp_path, data, days=1)
    blocks = [path for path in data.iterdir() if (path / "meta.json").is_file()]
    assert blocks, f"no TSDB block under {data}: {list(data.iterdir())}"
    assert not (tmp_path / "history.om").exists()  # the OpenMetrics file is removed once loaded
    # Its hours are metered at its own step, every later one at the production step.
    if shutil.which("prometheus"):
        env, _, _ = demo.plan(tmp_path, 8001, 9090)
        assert env["PORTAL_BILLING_HISTORY_STEP"] == "1800"
        assert env["PORTAL_BILLING_HISTORY_END"] == (tmp_path / "history-end").read_text()
        assert "PORTAL_BILLING_STEP" not in env
