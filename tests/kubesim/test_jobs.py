"""The Job controller over HTTP: every way a batch/v1 Job can end."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from kubesim.clock import format_time
from kubesim.controllers import jobs
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import Clients, job, wait_for


@pytest.fixture(scope="module")
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def read(k, ns, name):
    return k.batch.read_namespaced_job(name, ns)


def condition(job_obj, kind):
    return next((c for c in job_obj.status.conditions or [] if c.type == kind), None)


def pods_of(k, ns, name):
    return k.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items


def events_of(k, ns, name):
    items = k.core.list_namespaced_event(ns).items
    return [e for e in items if e.involved_object.name == name]


def failed_creates(k, ns):
    return [e for e in events_of(k, ns, "blocked") if e.reason == "FailedCreate"]


def restarted_or_gone(k, ns, name, restarts):
    """The job's pod restarted `restarts` times, or is gone (the job failed).

    One LIST per poll: the pod can vanish between two reads on a busy machine.
    """
    pods = pods_of(k, ns, name)
    if not pods:
        return True
    statuses = pods[0].status.container_statuses or []
    return bool(statuses) and statuses[0].restart_count >= restarts


def running_or_gone(k, ns, name):
    pods = pods_of(k, ns, name)
    return not pods or pods[0].status.container_statuses[0].state.running is not None


def deleting(pods):
    """The pods, once the first is being deleted (checked on one LIST's answer)."""
    return pods if pods and pods[0].metadata.deletion_timestamp else None


def phases(k, ns, name):
    return sorted(p.status.phase for p in pods_of(k, ns, name))


def running(k, ns, name, count=1):
    return wait_for(
        lambda: len([p for p in pods_of(k, ns, name) if p.status.phase == "Running"]) == count
    )


def phase_by_pod(k, ns, name):
    """{pod name: phase} of the job's pods, from one LIST."""
    return {p.metadata.name: p.status.phase for p in pods_of(k, ns, name)}


def new_pod_running(k, ns, name, seen):
    """The name of a Running pod of the job not in `seen`, once there is one.

    Not "one pod is Running": right after the clock jumps, the pod that is about
    to end can still read Running before the kubelet ends it and the controller
    makes its replacement; advancing the clock then ends the old pod only, and
    the replacement, created after the jump, never reaches its end.
    """
    return wait_for(
        lambda: next(
            (
                pod
                for pod, phase in phase_by_pod(k, ns, name).items()
                if phase == "Running" and pod not in seen
            ),
            None,
        )
    )


def test_it_completes_a_job(k):
    ns = k.namespace()
    k.batch.create_namespaced_job(ns, job("train", 1, {"kubesim.io/duration": "10m"}))
    running(k, ns, "train")
    (pod,) = pods_of(k, ns, "train")
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train"
    assert pod.metadata.labels["controller-uid"] == read(k, ns, "train").metadata.uid
    assert pod.metadata.owner_references[0].kind == "Job"
    assert wait_for(lambda: read(k, ns, "train").status.active == 1)
    k.advance(601)
    # Read once per poll: the job read for the check is the one returned.
    done = wait_for(lambda: condition(job := read(k, ns, "train"), "Complete") and job)
    assert done.status.succeeded == 1 and done.status.active is None  # 0 is omitted
    assert done.status.completion_time >= done.status.start_time
    assert condition(done, "SuccessCriteriaMet").status == "True"


def test_it_runs_completions_with_parallelism(k):
    ns = k.namespace()
    spec = {"completions": 3, "parallelism": 2}
    k.batch.create_namespaced_job(ns, job("sweep", 0, {"kubesim.io/duration": "60s"}, spec))
    first = set(running(k, ns, "sweep", 2) and phase_by_pod(k, ns, "sweep"))
    k.advance(61)
    # The first two have ended and the third runs (one LIST says both).
    wait_for(
        lambda: (
            (now := phase_by_pod(k, ns, "sweep"))
            and all(now.get(pod) == "Succeeded" for pod in first)
            and [phase for pod, phase in now.items() if pod not in first] == ["Running"]
        )
    )
    k.advance(61)
    wait_for(lambda: condition(read(k, ns, "sweep"), "Complete"))
    assert read(k, ns, "sweep").status.succeeded == 3
    assert len(pods_of(k, ns, "sweep")) == 3


def test_it_fails_after_the_backoff_limit(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "5s", "kubesim.io/exit-code": "2"}
    k.batch.create_namespaced_job(ns, job("crash", 0, annotations, {"backoffLimit": 1}))
    seen = {new_pod_running(k, ns, "crash", set())}
    k.advance(6)
    wait_for(lambda: phases(k, ns, "crash") == ["Failed"])
    k.advance(10)  # the job controller's back-off before it replaces a failed pod
    seen.add(new_pod_running(k, ns, "crash", seen))
    k.advance(6)
    failed = wait_for(lambda: condition(read(k, ns, "crash"), "Failed"))
    assert failed.reason == "BackoffLimitExceeded"
    assert failed.message == "Job has reached the specified backoff limit"
    assert read(k, ns, "crash").status.failed == 2
    assert condition(read(k, ns, "crash"), "FailureTarget").status == "True"


def test_on_failure_restarts_count_toward_backoff(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "5s", "kubesim.io/exit-code": "1"}
    manifest = job("flaky", 0, annotations, {"backoffLimit": 2}, restart_policy="OnFailure")
    k.batch.create_namespaced_job(ns, manifest)
    running(k, ns, "flaky")
    (pod,) = pods_of(k, ns, "flaky")
    for restarts, back_off in ((1, 10), (2, 20)):
        k.advance(6)
        wait_for(lambda n=restarts: restarted_or_gone(k, ns, "flaky", n))
        k.advance(back_off)  # the kubelet's CrashLoopBackOff before the next run
        wait_for(lambda: running_or_gone(k, ns, "flaky"))
    k.advance(6)
    wait_for(lambda: restarted_or_gone(k, ns, "flaky", 3))
    assert pod.spec.restart_policy == "OnFailure"
    wait_for(lambda: condition(read(k, ns, "flaky"), "FailureTarget"))
    k.advance(31)  # the Failed condition waits for the pod's grace period
    failed = wait_for(lambda: condition(read(k, ns, "flaky"), "Failed"))
    assert failed.reason == "BackoffLimitExceeded"


def test_the_deadline_fails_the_job_and_deletes_its_pods(k):
    ns = k.namespace()
    manifest = job("slow", 1, {"kubesim.io/duration": "1h"}, {"activeDeadlineSeconds": 120})
    k.batch.create_namespaced_job(ns, manifest)
    running(k, ns, "slow")
    k.advance(121)
    target = wait_for(lambda: condition(read(k, ns, "slow"), "FailureTarget"))
    assert target.reason == "DeadlineExceeded"
    # Failed waits until the pod it deleted has terminated, as since Kubernetes 1.31.
    terminating = wait_for(lambda: read(k, ns, "slow").status.terminating)
    assert terminating == 1 and not condition(read(k, ns, "slow"), "Failed")
    k.advance(31)
    failed = wait_for(lambda: condition(read(k, ns, "slow"), "Failed"))
    assert failed.reason == "DeadlineExceeded"
    assert failed.message == "Job was active longer than specified deadline"
    assert wait_for(lambda: not pods_of(k, ns, "slow"))
    assert read(k, ns, "slow").status.active is None


def test_suspend_deletes_pods_and_resume_resets_the_start_time(k):
    ns = k.namespace()
    spec = {"suspend": True, "activeDeadlineSeconds": 600}
    k.batch.create_namespaced_job(ns, job("window", 1, {"kubesim.io/duration": "1h"}, spec))
    suspended = wait_for(lambda: condition(read(k, ns, "window"), "Suspended"))
    assert suspended.reason == "JobSuspended"
    assert read(k, ns, "window").status.start_time is None
    assert pods_of(k, ns, "window") == []

    k.batch.patch_namespaced_job("window", ns, {"spec": {"suspend": False}})
    running(k, ns, "window")
    first_start = read(k, ns, "window").status.start_time
    k.advance(300)
    k.batch.patch_namespaced_job("window", ns, {"spec": {"suspend": True}})
    (leaving,) = wait_for(lambda: deleting(pods_of(k, ns, "window")))
    assert leaving.metadata.finalizers is None  # deleted by the controller: never counted
    k.advance(31)
    wait_for(lambda: not pods_of(k, ns, "window"))
    assert not read(k, ns, "window").status.failed
    assert condition(read(k, ns, "window"), "Suspended").status == "True"

    k.advance(3600)  # suspended time does not count against the deadline
    k.batch.patch_namespaced_job("window", ns, {"spec": {"suspend": False}})
    running(k, ns, "window")
    resumed = read(k, ns, "window")
    assert condition(resumed, "Suspended").reason == "JobResumed"
    assert resumed.status.start_time >= first_start + timedelta(seconds=3900)
    assert not condition(resumed, "Failed")
    k.advance(601)
    wait_for(lambda: condition(read(k, ns, "window"), "FailureTarget"))
    k.advance(31)
    failed = wait_for(lambda: condition(read(k, ns, "window"), "Failed"))
    assert failed.reason == "DeadlineExceeded"


def test_pod_failure_policy_ignores_disruptions(k):
    ns = k.namespace()
    spec = {
        "backoffLimit": 0,
        "podFailurePolicy": {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            ]
        },
    }
    k.batch.create_namespaced_job(ns, job("spot", 1, {"kubesim.io/duration": "1h"}, spec))
    running(k, ns, "spot")
    (first,) = pods_of(k, ns, "spot")
    k.sim.control_plane.kubelet.disrupt_pod(ns, first.metadata.name, "TerminationByKubelet")
    wait_for(lambda: phases(k, ns, "spot") == ["Failed"])
    # An ignored failure still feeds the controller's back-off record (as upstream).
    k.advance(10)
    # A replacement pod starts; the disruption is not a failure.
    wait_for(
        lambda: any(
            p.metadata.name != first.metadata.name and p.status.phase == "Running"
            for p in pods_of(k, ns, "spot")
        )
    )
    status = read(k, ns, "spot").status
    assert status.failed is None
    assert not condition(read(k, ns, "spot"), "Failed")


def test_pod_failure_policy_fail_job_on_exit_code(k):
    ns = k.namespace()
    spec = {
        "backoffLimit": 5,
        "podFailurePolicy": {
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
    }
    annotations = {"kubesim.io/duration": "5s", "kubesim.io/exit-code": "42"}
    k.batch.create_namespaced_job(ns, job("bad-input", 0, annotations, spec))
    running(k, ns, "bad-input")
    k.advance(6)
    failed = wait_for(lambda: condition(read(k, ns, "bad-input"), "Failed"))
    assert failed.reason == "PodFailurePolicy"
    assert "failed with exit code 42 matching FailJob rule at index 0" in failed.message


def test_ttl_deletes_the_finished_job_and_its_pods(k):
    ns = k.namespace()
    spec = {"ttlSecondsAfterFinished": 300}
    k.batch.create_namespaced_job(ns, job("brief", 0, {"kubesim.io/duration": "10s"}, spec))
    running(k, ns, "brief")
    k.advance(11)
    wait_for(lambda: condition(read(k, ns, "brief"), "Complete"))
    assert k.batch.list_namespaced_job(ns).items
    k.advance(301)
    wait_for(lambda: not k.batch.list_namespaced_job(ns).items)
    assert wait_for(lambda: not pods_of(k, ns, "brief"))


def test_quota_blocks_pods_with_a_failed_create_event_then_retries(k):
    ns = k.namespace()
    k.core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}}
    )
    k.batch.create_namespaced_job(ns, job("blocked", 1, {"kubesim.io/duration": "1h"}))
    event = wait_for(
        lambda: next((e for e in events_of(k, ns, "blocked") if e.reason == "FailedCreate"), None)
    )
    assert event.type == "Warning"
    assert event.message.startswith('Error creating: pods "blocked-')
    assert event.message.endswith(
        "is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=0"
    )
    # Retries fold into the one event instead of piling up new ones.
    wait_for(lambda: failed_creates(k, ns)[0].count >= 2)
    assert len(failed_creates(k, ns)) == 1
    blocked = read(k, ns, "blocked")
    assert blocked.status.active is None
    assert blocked.status.start_time is not None  # set even though no pod could start

    k.core.patch_namespaced_resource_quota(
        "gpus", ns, {"spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}
    )
    running(k, ns, "blocked")
    assert wait_for(lambda: read(k, ns, "blocked").status.active == 1)


def test_a_failed_pod_is_replaced_after_the_controllers_back_off(k):
    ns = k.namespace()
    annotations = {"kubesim.io/duration": "5s", "kubesim.io/exit-code": "1"}
    k.batch.create_namespaced_job(ns, job("again", 0, annotations, {"backoffLimit": 3}))
    for failed, back_off in ((1, 10), (2, 20)):
        running(k, ns, "again")
        k.advance(6)
        wait_for(lambda n=failed: phases(k, ns, "again") == ["Failed"] * n)
        k.advance(back_off - 2)
        time.sleep(0.3)  # a few control loop passes: still no replacement
        assert phases(k, ns, "again") == ["Failed"] * failed
        k.advance(2)
        wait_for(lambda n=failed: len(pods_of(k, ns, "again")) == n + 1)


def test_failure_backoff_record():
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def failed_pod(at):
        ready = {"type": "Ready", "status": "False", "lastTransitionTime": format_time(at)}
        return {"metadata": {}, "status": {"phase": "Failed", "conditions": [ready]}}

    record = jobs.FailureBackoff().after([], [failed_pod(start)])
    assert record.remaining(start + timedelta(seconds=4)) == 6
    record = record.after([], [failed_pod(start + timedelta(seconds=30))])
    assert record.remaining(start + timedelta(seconds=30)) == 20
    for _ in range(10):
        record = record.after([], [failed_pod(start + timedelta(seconds=40))])
    assert record.remaining(start + timedelta(seconds=40)) == 360  # capped at 6 minutes
    assert record.after([failed_pod(start + timedelta(seconds=50))], []).remaining(start) == 0
