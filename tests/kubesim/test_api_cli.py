"""python -m kubesim: serves, writes a kubeconfig, saves and reloads its state."""

import json
import re
import signal
import subprocess
import sys
import urllib.request

import yaml


def start(tmp_path, *extra):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--port",
            "0",
            "--state",
            str(tmp_path / "state.json"),
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = re.search(r"http://\S+", process.stdout.readline()).group(0)
    return process, url


def stop(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0


def test_state_survives_a_restart(tmp_path):
    process, url = start(tmp_path)
    try:
        config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        request = urllib.request.Request(
            url + "/api/v1/namespaces",
            method="POST",
            data=json.dumps({"metadata": {"name": "kept"}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert urllib.request.urlopen(request, timeout=5).status == 201
        nodes = json.load(urllib.request.urlopen(url + "/api/v1/nodes", timeout=5))["items"]
    finally:
        stop(process)
    assert (tmp_path / "state.json").exists()

    process, url = start(tmp_path)
    try:
        namespace = json.load(urllib.request.urlopen(url + "/api/v1/namespaces/kept", timeout=5))
        assert namespace["status"]["phase"] == "Active"
        again = json.load(urllib.request.urlopen(url + "/api/v1/nodes", timeout=5))["items"]
        assert sorted(n["metadata"]["name"] for n in again) == sorted(
            n["metadata"]["name"] for n in nodes
        )
    finally:
        stop(process)
