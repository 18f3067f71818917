"""Pods that go away: graceful deletion, the Eviction API, spot reclaims (on demand and
at random) and what the Job controller makes of them, over HTTP with the official
client, as a batch scheduler on a real cluster would see it."""

import json

import pytest
import requests
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.kubesim.simhelpers import (
    Clients,
    condition,
    job,
    pod,
    pod_gone,
    running_pod,
    wait_for,
)

L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}
IGNORE_DISRUPTIONS = {
    "backoffLimit": 0,
    "podFailurePolicy": {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    },
}


@pytest.fixture
def k():
    with running_kubesim(SMALL_CLUSTER) as sim:
        yield Clients(sim)


def job_pods(k, ns, name):
    return k.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items


def reclaim(k, node, **body):
    response = requests.post(f"{k.sim.url}/_sim/nodes/{node}/reclaim", json=body, timeout=10)
    return response.status_code, response.json()


def node_names(k):
    return sorted(n.metadata.name for n in k.core.list_node().items)


def test_deleting_a_running_pod_waits_for_its_grace_period(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("web", annotations={"kubesim.io/duration": "1h"}))
    running_pod(k, ns, "web")
    k.core.delete_namespaced_pod("web", ns)
    leaving = k.core.read_namespaced_pod("web", ns)
    assert leaving.metadata.deletion_grace_period_seconds == 30
    assert (leaving.metadata.deletion_timestamp - leaving.metadata.creation_timestamp).seconds >= 30
    assert leaving.status.phase == "Running"
    k.advance(29)
    assert k.core.read_namespaced_pod("web", ns).status.phase == "Running"
    k.advance(2)
    assert wait_for(lambda: pod_gone(k, ns, "web"))


def test_a_zero_grace_period_or_an_unscheduled_pod_goes_at_once(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("web", annotations={"kubesim.io/duration": "1h"}))
    running_pod(k, ns, "web")
    k.core.delete_namespaced_pod("web", ns, grace_period_seconds=0)
    assert pod_gone(k, ns, "web")
    k.core.create_namespaced_pod(ns, pod("nowhere", node_selector={"no": "such-node"}))
    k.core.delete_namespaced_pod("nowhere", ns)
    assert pod_gone(k, ns, "nowhere")


def test_the_eviction_api_marks_the_pod_and_deletes_it_gracefully(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(ns, pod("web", annotations={"kubesim.io/duration": "1h"}))
    running_pod(k, ns, "web")
    eviction = client.V1Eviction(
        metadata=client.V1ObjectMeta(name="web", namespace=ns),
        delete_options=client.V1DeleteOptions(grace_period_seconds=10),
    )
    k.core.create_namespaced_pod_eviction("web", ns, eviction)
    evicted = k.core.read_namespaced_pod("web", ns)
    target = condition(evicted, "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "EvictionByEvictionAPI")
    assert target.message == "Eviction API: evicting"
    assert evicted.metadata.deletion_grace_period_seconds == 10
    k.advance(11)
    assert wait_for(lambda: pod_gone(k, ns, "web"))


def test_eviction_errors_read_like_the_apiserver(k):
    ns = k.namespace()
    with pytest.raises(ApiException) as missing:
        k.core.create_namespaced_pod_eviction(
            "ghost", ns, client.V1Eviction(metadata=client.V1ObjectMeta(name="ghost"))
        )
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == 'pods "ghost" not found'
    k.core.create_namespaced_pod(ns, pod("web"))
    with pytest.raises(ApiException) as mismatch:
        k.core.create_namespaced_pod_eviction(
            "web", ns, client.V1Eviction(metadata=client.V1ObjectMeta(name="other"))
        )
    assert mismatch.value.status == 400


def test_reclaim_by_eviction_is_ignored_by_a_pod_failure_policy(k):
    ns = k.namespace()
    manifest = job("spot", 1, {"kubesim.io/duration": "1h"}, IGNORE_DISRUPTIONS, node_selector=L4)
    k.batch.create_namespaced_job(ns, manifest)
    (first,) = wait_for(lambda: [p for p in job_pods(k, ns, "spot") if p.status.phase == "Running"])
    assert first.spec.node_name == "gpu-l4-0"
    assert first.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]

    status, answer = reclaim(
        k, "gpu-l4-0", mode="eviction", grace_seconds=60, returns_after_seconds=300
    )
    assert status == 200 and answer["mode"] == "eviction"
    node = k.core.read_node("gpu-l4-0")
    assert node.spec.unschedulable
    cordon = ("node.kubernetes.io/unschedulable", "NoSchedule")
    wait_for(
        lambda: cordon in [(t.key, t.effect) for t in k.core.read_node("gpu-l4-0").spec.taints]
    )
    evicted = k.core.read_namespaced_pod(first.metadata.name, ns)
    assert condition(evicted, "DisruptionTarget").reason == "EvictionByEvictionAPI"
    assert evicted.metadata.deletion_timestamp is not None
    # podFailurePolicy implies podReplacementPolicy Failed: no replacement while it terminates.
    assert wait_for(lambda: k.batch.read_namespaced_job("spot", ns).status.terminating) == 1
    assert len(job_pods(k, ns, "spot")) == 1

    k.advance(61)  # grace over: the pod fails, the node is gone
    assert wait_for(lambda: "gpu-l4-0" not in node_names(k))
    k.advance(10)  # the job controller's back-off: an ignored failure counts there too
    replacement = wait_for(
        lambda: [p for p in job_pods(k, ns, "spot") if p.metadata.name != first.metadata.name]
    )[0]
    assert wait_for(lambda: pod_gone(k, ns, first.metadata.name))
    done = k.batch.read_namespaced_job("spot", ns)
    assert not done.status.failed and not condition(done, "Failed")
    assert replacement.spec.node_name is None  # no L4 node left until the new one joins

    k.advance(300)
    assert wait_for(lambda: "gpu-l4-1" in node_names(k))
    fresh = k.core.read_node("gpu-l4-1")
    assert fresh.metadata.labels["kubernetes.io/hostname"] == "gpu-l4-1"
    assert not fresh.spec.unschedulable
    assert fresh.status.allocatable["nvidia.com/gpu"] == "2"
    moved = running_pod(k, ns, replacement.metadata.name)
    assert moved.spec.node_name == "gpu-l4-1"


def test_without_a_pod_failure_policy_a_reclaim_counts_toward_the_backoff_limit(k):
    ns = k.namespace()
    spec = {"backoffLimit": 0}
    k.batch.create_namespaced_job(
        ns, job("fragile", 1, {"kubesim.io/duration": "1h"}, spec, node_selector=L4)
    )
    wait_for(lambda: [p for p in job_pods(k, ns, "fragile") if p.status.phase == "Running"])
    assert reclaim(k, "gpu-l4-0", grace_seconds=30)[0] == 200
    # A terminating pod counts as failed at once (podReplacementPolicy TerminatingOrFailed).
    target = wait_for(
        lambda: condition(k.batch.read_namespaced_job("fragile", ns), "FailureTarget")
    )
    assert target.reason == "BackoffLimitExceeded"
    assert k.batch.read_namespaced_job("fragile", ns).status.failed == 1
    k.advance(31)
    failed = wait_for(lambda: condition(k.batch.read_namespaced_job("fragile", ns), "Failed"))
    assert failed.reason == "BackoffLimitExceeded"


def test_reclaim_by_shutdown_fails_pods_with_termination_by_kubelet(k):
    ns = k.namespace()
    k.core.create_namespaced_pod(
        ns, pod("solo", 1, annotations={"kubesim.io/duration": "1h"}, node_selector=L4)
    )
    running_pod(k, ns, "solo")
    assert reclaim(k, "gpu-l4-0", mode="shutdown", grace_seconds=45)[0] == 200
    ready = {c.type: c for c in k.core.read_node("gpu-l4-0").status.conditions}["Ready"]
    assert (ready.status, ready.message) == ("False", "node is shutting down")
    assert k.core.read_namespaced_pod("solo", ns).status.phase == "Running"
    k.advance(46)
    assert wait_for(lambda: pod_gone(k, ns, "solo"))  # failed, then collected with its node
    assert "gpu-l4-0" not in node_names(k)


def test_shutdown_pods_of_a_job_are_failed_with_the_condition_before_they_go(k):
    ns = k.namespace()
    k.batch.create_namespaced_job(
        ns, job("spot", 1, {"kubesim.io/duration": "1h"}, IGNORE_DISRUPTIONS, node_selector=L4)
    )
    (first,) = wait_for(lambda: [p for p in job_pods(k, ns, "spot") if p.status.phase == "Running"])
    reclaim(k, "gpu-l4-0", mode="shutdown", grace_seconds=10)
    k.advance(11)
    assert wait_for(lambda: pod_gone(k, ns, first.metadata.name))
    status = k.batch.read_namespaced_job("spot", ns).status
    assert not status.failed
    k.advance(10)  # the job controller's back-off: an ignored failure counts there too
    assert wait_for(lambda: len(job_pods(k, ns, "spot")) == 1)
    events = k.core.list_namespaced_event(ns).items
    assert [e.count for e in events if e.reason == "SuccessfulCreate"] == [1, 1]


def test_reclaim_rejects_bad_input(k):
    assert reclaim(k, "gpu-l4-0", mode="explode")[0] == 400
    status, answer = reclaim(k, "gpu-l4-0", grace_seconds=-1)
    assert status == 400 and "grace_seconds" in answer["message"]
    assert reclaim(k, "gpu-l4-0", grace_seconds="soon")[0] == 400
    assert reclaim(k, "gpu-l4-0", typo=1)[0] == 400
    assert reclaim(k, "no-such-node")[0] == 404
    assert reclaim(k, "gpu-l4-0")[0] == 200
    assert reclaim(k, "gpu-l4-0")[0] == 409


RANDOM_SPOT = """\
nodePools:
  - name: l4-spot
    namePrefix: spot
    count: 3
    spot: true
    gpu: {model: L4, count: 1}
    reclaimRatePerHour: 1.5
    seed: 42
    reclaimGraceSeconds: 60
    replacementAfterSeconds: 120
"""


def settled(k):
    """The report once the control loop has caught up with the clock (read once)."""
    report = requests.get(f"{k.sim.url}/_sim/nodes", timeout=10).json()
    now = report["now"]
    due = [r["deadline"] for r in report["pending"]] + [j["at"] for j in report["joins"]]
    due += list(report["next_reclaim"].values())
    return report if all(moment > now for moment in due) else None


def test_random_reclaims_repeat_for_the_same_seed(tmp_path):
    path = tmp_path / "spot.yaml"
    path.write_text(RANDOM_SPOT)
    runs = []
    for _ in range(2):
        with running_kubesim(str(path)) as sim:
            k = Clients(sim)
            for _ in range(12):  # six sim hours in half-hour steps
                k.advance(1800)
                report = wait_for(lambda k=k: settled(k))
            reclaims = [(r["node"], r["mode"], r["after_seconds"]) for r in report["reclaims"]]
            runs.append((reclaims, node_names(k)))
    assert runs[0] == runs[1]
    reclaims, names = runs[0]
    assert len(reclaims) >= 3 and {mode for _, mode, _ in reclaims} == {"eviction"}
    assert len(names) == 3 and names != ["spot-0", "spot-1", "spot-2"]
