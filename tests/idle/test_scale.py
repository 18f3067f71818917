"""Evaluating 10,000 GPUs: the portal's side of one evaluation (reading the two
queries' answers, deciding, writing what changed) within 1 s of CPU, with a
fixed number of database queries whatever the number of pods. The answers are
built as Prometheus returns them (billing.prometheus.Series); that the
evaluation asks exactly two queries is tested on a real Prometheus
(test_evaluate.py)."""

import time
from datetime import UTC, datetime, timedelta

from billing.prometheus import Series
from cluster.models import Flavor
from idle import actions, evaluation

T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
PODS = 1250  # x 8 GPUs = 10,000 GPUs


def answers(minute, idle_every=10):
    """Every tenth pod idle (in ReplicaSets of Deployments), the rest busy."""
    activity, facts = [], []
    for index in range(PODS):
        namespace, pod = "vision", f"worker-{index}-abcde"
        reading = 0.01 if index % idle_every == 0 else 0.7
        activity.append(Series({"namespace": namespace, "pod": pod}, [(minute, reading)]))
        facts.append(
            Series(
                {"namespace": namespace, "pod": pod, "owner_kind": "ReplicaSet"}
                | {"owner_name": f"worker-{index}-5f7c9"},
                [(minute, 1)],
            )
        )
        facts.append(
            Series(
                {"namespace": namespace, "replicaset": f"worker-{index}-5f7c9"}
                | {"owner_kind": "Deployment", "owner_name": f"worker-{index}"},
                [(minute, 1)],
            )
        )
        facts.append(
            Series(
                {"namespace": namespace, "pod": pod, "node": f"node-{index}"}
                | {"resource": "nvidia_com_gpu"},
                [(minute, 8)],
            )
        )
    return activity, facts


def test_ten_thousand_gpus_in_under_a_second_of_cpu(
    admin_user, vision, h100, django_assert_max_num_queries
):
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report")
    flavors = list(Flavor.objects.all())
    spent = []
    for minute in range(1, 4):
        now = T0 + timedelta(minutes=minute)
        activity, facts = answers(now.timestamp())
        started = time.process_time()
        with django_assert_max_num_queries(12):
            observed = evaluation.workloads(activity, facts, flavors)
            result = actions.apply_observations(observed, flavors, now)
        spent.append(time.process_time() - started)
        assert (result.workloads, result.idle) == (PODS, PODS // 10)
    print(f"portal CPU per evaluation of 10,000 GPUs: {max(spent):.3f} s (worst of 3)")
    assert max(spent) < 1.0
