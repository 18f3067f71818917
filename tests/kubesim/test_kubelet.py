"""The kubelet stand-in: durations, exit codes, restarts, disruptions and logs."""

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes.client import ApiException
from kubernetes.watch import Watch

from kubesim.kubelet import runtime
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import Clients, error_body, pod, wait_for


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def phase(k, ns, name):
    return k.core.read_namespaced_pod(name, ns).status.phase


def run(k, ns, manifest):
    k.core.create_namespaced_pod(ns, manifest)
    name = manifest["metadata"]["name"]
    wait_for(lambda: phase(k, ns, name) == "Running")
    return k.core.read_namespaced_pod(name, ns)


def test_a_running_pod_looks_like_one(k):
    ns = k.namespace()
    running = run(k, ns, pod("web", 1))
    status = running.status
    assert status.pod_ip and status.host_ip and status.start_time
    (container,) = status.container_statuses
    assert container.ready and container.started and container.state.running.started_at
    ready = {c.type: c.status for c in status.conditions}
    assert ready["Ready"] == ready["ContainersReady"] == ready["PodScheduled"] == "True"


def test_it_succeeds_after_the_annotated_duration(k):
    ns = k.namespace()
    run(k, ns, pod("job", annotations={"kubesim.io/duration": "5m"}))
    k.advance(200)
    assert phase(k, ns, "job") == "Running"
    k.advance(101)
    wait_for(lambda: phase(k, ns, "job") == "Succeeded")
    terminated = k.core.read_namespaced_pod("job", ns).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")


def test_it_fails_with_the_annotated_exit_code(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "10s", "kubesim.io/exit-code": "3"}
    run(k, ns, pod("oops", annotations=annotations))
    k.advance(11)
    wait_for(lambda: phase(k, ns, "oops") == "Failed")
    status = k.core.read_namespaced_pod("oops", ns).status
    terminated = status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")


def test_on_failure_restarts_in_place_until_fail_attempts_run_out(k):
    ns = k.namespace()
    annotations = {
        "kubesim.io/duration": "10s",
        "kubesim.io/exit-code": "1",
        "kubesim.io/fail-attempts": "2",
    }
    run(k, ns, pod("retry", annotations=annotations, restart_policy="OnFailure"))
    for restarts, back_off in ((1, 10), (2, 20)):
        k.advance(11)
        wait_for(lambda n=restarts: restarted(k, ns, "retry", n, "waiting"))
        k.advance(back_off + 1)  # the kubelet's CrashLoopBackOff: 10 s, doubling
        wait_for(lambda n=restarts: restarted(k, ns, "retry", n, "running"))
    last = k.core.read_namespaced_pod("retry", ns).status.container_statuses[0].last_state
    assert last.terminated.exit_code == 1
    k.advance(11)
    wait_for(lambda: phase(k, ns, "retry") == "Succeeded")


def restarted(k, ns, name, count, state):
    (container,) = k.core.read_namespaced_pod(name, ns).status.container_statuses
    return container.restart_count == count and getattr(container.state, state) is not None


def test_a_failing_container_waits_in_crash_loop_back_off(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "10s", "kubesim.io/exit-code": "1"}
    running = run(k, ns, pod("crash", annotations=annotations, restart_policy="Always"))
    k.advance(11)
    wait_for(lambda: restarted(k, ns, "crash", 1, "waiting"))
    status = k.core.read_namespaced_pod("crash", ns).status
    (container,) = status.container_statuses
    assert status.phase == "Running"
    assert container.state.waiting.reason == "CrashLoopBackOff"
    assert container.state.waiting.message == (
        f"back-off 10s restarting failed container=main pod=crash_{ns}({running.metadata.uid})"
    )
    assert container.last_state.terminated.exit_code == 1
    assert not container.ready and not container.started
    ready = {c.type: (c.status, c.reason) for c in status.conditions}
    assert ready["Ready"] == ready["ContainersReady"] == ("False", "ContainersNotReady")
    k.advance(5)
    assert restarted(k, ns, "crash", 1, "waiting")  # still backing off
    k.advance(6)
    wait_for(lambda: restarted(k, ns, "crash", 1, "running"))
    assert k.core.read_namespaced_pod("crash", ns).status.container_statuses[0].ready
    events = k.core.list_namespaced_event(ns, field_selector="reason=BackOff").items
    assert [e.type for e in events] == ["Warning"]


def test_the_back_off_doubles_up_to_five_minutes():
    assert [runtime.crash_back_off(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


def test_a_bound_pod_is_container_creating_before_it_runs(k):
    ns = k.namespace()
    seen = []
    made = k.core.create_namespaced_pod(ns, pod("slow", annotations={"kubesim.io/duration": "1h"}))
    watch = Watch()
    for event in watch.stream(
        k.core.list_namespaced_pod,
        ns,
        resource_version=made.metadata.resource_version,
        timeout_seconds=5,
        _preload_content=False,
    ):
        status = event["raw_object"].get("status") or {}
        states = [c["state"] for c in status.get("containerStatuses") or []]
        waiting = states and states[0].get("waiting", {}).get("reason")
        seen.append(status.get("phase") + (f"/{waiting}" if waiting else ""))
        if status.get("phase") == "Running":
            break
        if waiting:
            conditions = {c["type"]: c for c in status["conditions"]}
            assert conditions["Ready"]["reason"] == "ContainersNotReady"
            assert conditions["Ready"]["message"] == "containers with unready status: [main]"
            assert status["startTime"] and status["hostIP"]
    watch.stop()
    assert [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s] == [
        "Pending",
        "Pending/ContainerCreating",
        "Running",
    ]


def test_disrupt_after_fails_the_pod_with_a_disruption_target(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "1h", "kubesim.io/disrupt-after": "60s"}
    run(k, ns, pod("spot", 1, annotations=annotations))
    k.advance(61)
    wait_for(lambda: phase(k, ns, "spot") == "Failed")
    status = k.core.read_namespaced_pod("spot", ns).status
    target = next(c for c in status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    assert status.container_statuses[0].state.terminated.exit_code == 137


def test_pod_logs_tell_the_run(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "150s", "kubesim.io/log": "loading checkpoint"}
    run(k, ns, pod("talk", annotations=annotations))
    k.advance(151)
    wait_for(lambda: phase(k, ns, "talk") == "Succeeded")
    text = k.core.read_namespaced_pod_log("talk", ns)
    lines = text.splitlines()
    assert lines[0].endswith("kubesim: container main started")
    assert lines[1] == "loading checkpoint"
    assert lines[2].endswith("step 1: 40% done")
    assert lines[-1].endswith("kubesim: container main exited with code 0")


def test_gpu_profiles():
    now = datetime(2025, 1, 1, 12, 0, 30, tzinfo=UTC)

    def util(annotations):
        return runtime.gpu_utilisation({"metadata": {"annotations": annotations}}, now, "n/0")

    assert util({"kubesim.io/gpu-profile": "idle"}) == 0.0
    assert 0.85 <= util({}) <= 0.95  # busy by default
    assert 0.37 <= util({"kubesim.io/gpu-util": "40"}) <= 0.43
    assert util({"kubesim.io/gpu-profile": "bursty"}) < 0.05  # idle after second 20
    assert util({"kubesim.io/gpu-profile": "constant", "kubesim.io/gpu-util": "37"}) == 0.37
    assert util({"kubesim.io/gpu-profile": "nonsense"}) > 0.85  # unknown: busy


def test_idle_after_and_daily_profiles_follow_the_clock():
    started = datetime(2025, 1, 1, 8, 0, tzinfo=UTC)
    pod = {
        "metadata": {
            "annotations": {
                "kubesim.io/gpu-profile": "idle-after",
                "kubesim.io/gpu-util": "70",
                "kubesim.io/gpu-idle-after": "2h",
            }
        },
        "status": {"startTime": "2025-01-01T08:00:00Z"},
    }
    assert runtime.gpu_utilisation(pod, started + timedelta(minutes=119), "n/0") == 0.7
    assert runtime.gpu_utilisation(pod, started + timedelta(minutes=120), "n/0") == 0
    pod["metadata"]["annotations"] = {
        "kubesim.io/gpu-profile": "daily",
        "kubesim.io/gpu-busy-hours": "22:00-02:00",  # wraps midnight
    }
    at = {hour: datetime(2025, 1, 2, hour, 30, tzinfo=UTC) for hour in (1, 2, 12, 23)}
    busy = {hour: runtime.gpu_utilisation(pod, moment, "n/0") for hour, moment in at.items()}
    assert busy == {1: 0.9, 2: 0, 12: 0, 23: 0.9}


def test_framebuffer_level_is_capped_at_the_device():
    load = runtime.GpuLoad(fb_used_mib=30000)
    assert load.framebuffer_used(81559, 0.5) == 30000
    assert load.framebuffer_used(23034, 0.5) == 23034
    assert runtime.GpuLoad().framebuffer_used(10000, 0.0) == 800


def test_durations_parse_like_go():
    assert runtime.parse_duration("300s") == 300
    assert runtime.parse_duration("5m") == 300
    assert runtime.parse_duration("1h30m") == 5400
    assert runtime.parse_duration("90") == 90
    assert runtime.parse_duration("bogus") == runtime.DEFAULT_DURATION


def test_logs_honour_limit_bytes_and_previous(k):
    ns = k.namespace()
    annotations = {
        "kubesim.io/duration": "10s",
        "kubesim.io/exit-code": "1",
        "kubesim.io/fail-attempts": "1",
    }
    run(k, ns, pod("logs", annotations=annotations, restart_policy="OnFailure"))
    whole = k.core.read_namespaced_pod_log("logs", ns)
    assert k.core.read_namespaced_pod_log("logs", ns, limit_bytes=7) == whole[:7]
    with pytest.raises(ApiException) as error:
        k.core.read_namespaced_pod_log("logs", ns, previous=True)
    assert error.value.status == 400
    assert error_body(error.value)["message"] == (
        'previous terminated container "main" in pod "logs" not found'
    )
    k.advance(11)
    wait_for(lambda: restarted(k, ns, "logs", 1, "waiting"))
    crashed = k.core.read_namespaced_pod_log("logs", ns, previous=True)
    assert crashed.splitlines()[-1].endswith("kubesim: container main exited with code 1")
    assert k.core.read_namespaced_pod_log("logs", ns) == crashed  # the latest container
    k.advance(11)
    wait_for(lambda: restarted(k, ns, "logs", 1, "running"))
    current = k.core.read_namespaced_pod_log("logs", ns).splitlines()
    assert len(current) == 1 and current[0].endswith("kubesim: container main started")
    assert k.core.read_namespaced_pod_log("logs", ns, previous=True) == crashed
    with pytest.raises(ApiException) as error:
        k.core.read_namespaced_pod_log("logs", ns, limit_bytes=0)
    assert error.value.status == 422
    assert error_body(error.value)["message"] == (
        'PodLogOptions "logs" is invalid: limitBytes: Invalid value: 0: must be greater than 0'
    )
