"""Fault injection, the request log and the other /_sim/ admin endpoints."""

import json
import time

import pytest
import urllib3
from kubernetes import client

from tests.kubesim.apihelpers import sim_request


def set_faults(sim, **settings):
    status, _, payload = sim_request(sim, "PUT", "/_sim/faults", settings)
    assert status == 200, payload
    return json.loads(payload)


@pytest.mark.parametrize("code, reason", [(500, "InternalError"), (503, "ServiceUnavailable")])
def test_injected_server_errors(kubesim, core, code, reason):
    set_faults(kubesim, error_rate=1.0, statuses=[code])
    with pytest.raises(client.ApiException) as error:
        core.list_namespace()
    assert error.value.status == code
    assert json.loads(error.value.body)["reason"] == reason


def test_injected_429_carries_retry_after(kubesim, core):
    set_faults(kubesim, error_rate=1.0, statuses=[429], retry_after=3)
    with pytest.raises(client.ApiException) as error:
        core.list_namespace()
    assert error.value.status == 429
    assert error.value.headers["Retry-After"] == "3"
    assert json.loads(error.value.body)["details"]["retryAfterSeconds"] == 3


def test_faults_can_target_paths_and_spare_admin_endpoints(kubesim, core, batch):
    set_faults(kubesim, error_rate=1.0, statuses=[500], paths=r"/jobs")
    assert core.list_namespace().items
    with pytest.raises(client.ApiException):
        batch.list_namespaced_job("default")
    status, _, payload = sim_request(kubesim, "GET", "/_sim/faults")
    assert status == 200 and json.loads(payload)["paths"] == "/jobs"
    assert sim_request(kubesim, "GET", "/metrics")[0] == 200


def test_error_rate_is_a_fraction(kubesim, core):
    kubesim.faults = type(kubesim.faults)(seed=7)
    set_faults(kubesim, error_rate=0.5, statuses=[503])
    failures = 0
    for _ in range(40):
        try:
            core.read_namespace("default")
        except client.ApiException:
            failures += 1
    assert 8 < failures < 32


def test_latency(kubesim, core):
    set_faults(kubesim, latency_ms=150)
    started = time.monotonic()
    core.read_namespace("default")
    assert time.monotonic() - started >= 0.15


def test_dropped_connection(kubesim, core):
    set_faults(kubesim, drop_rate=1.0)
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.read_namespace("default", _request_timeout=2)
    set_faults(kubesim)
    assert core.read_namespace("default").metadata.name == "default"


def test_request_log_records_verbs_and_statuses(kubesim, core):
    sim_request(kubesim, "DELETE", "/_sim/requests")
    core.read_namespace("default")
    with pytest.raises(client.ApiException):
        core.read_namespace("ghost")
    core.list_namespaced_pod("default")
    _, _, payload = sim_request(kubesim, "GET", "/_sim/requests")
    entries = [e for e in json.loads(payload)["items"] if e["verb"] != "admin"]
    assert [(e["verb"], e["resource"], e["name"], e["status"]) for e in entries] == [
        ("get", "namespaces", "default", 200),
        ("get", "namespaces", "ghost", 404),
        ("list", "pods", None, 200),
    ]
    assert entries[2]["path"] == "/api/v1/namespaces/default/pods"
    assert entries[2]["namespace"] == "default"


def test_clock_endpoint_advances_simulated_time(kubesim):
    before = kubesim.clock.now()
    status, _, payload = sim_request(kubesim, "POST", "/_sim/clock", {"advance": 3600})
    assert status == 200
    assert (kubesim.clock.now() - before).total_seconds() >= 3600
    sim_request(kubesim, "POST", "/_sim/clock", {"speed": 10})
    assert json.loads(sim_request(kubesim, "GET", "/_sim/clock")[2])["speed"] == 10


def test_metrics_come_from_the_provider(kubesim):
    kubesim.metrics_provider = lambda: "kubesim_up 1\n"
    status, headers, payload = sim_request(kubesim, "GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert payload == b"kubesim_up 1\n"


def test_bad_fault_settings_are_rejected(kubesim):
    status, _, _ = sim_request(kubesim, "PUT", "/_sim/faults", {"eror_rate": 1})
    assert status == 400
