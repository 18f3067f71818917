"""The evaluation on a real Prometheus holding a history of DCGM and
kube-state-metrics series (tests/billing/history.py), stepped minute by minute
through it as beat would: announced after the idle minutes, acted on (here:
report-only) after the grace, withdrawn when active again, exempt untouched,
two PromQL queries per evaluation whatever the number of pods."""

import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from idle import actions
from idle.models import IdleAction, IdleState
from tests.billing.history import Device, Pod, openmetrics
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus

T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
END = T0 + timedelta(hours=1)


def idle_then(active_from=None):
    """Engine activity by minute: 1 % (idle), then 60 % from `active_from` on."""
    return lambda m: 0.6 if active_from is not None and m >= active_from else 0.01


def pod(name, owner, activity, gpus=1):
    return Pod(
        "vision",
        name,
        "gpu-h100-0",
        "nvidia_com_gpu",
        gpus,
        T0,
        END,
        devices=[Device(g, activity) for g in range(gpus)],
        owner=owner,
    )


PODS = [
    # A notebook Deployment (through its ReplicaSet), idle throughout, 2 GPUs.
    pod("notebook-5f7c9-x2x4q", ("ReplicaSet", "notebook-5f7c9"), idle_then(), gpus=2),
    # An inference Deployment that becomes busy at minute 13: in its grace.
    pod("infer-6b8d4-qq7wz", ("ReplicaSet", "infer-6b8d4"), idle_then(active_from=13)),
    # A StatefulSet its manager exempted.
    pod("db-0", ("StatefulSet", "db"), idle_then()),
    # A bare pod.
    pod("scratch", ("<none>", "<none>"), idle_then()),
    # Busy all along.
    pod("train-abcde", ("Job", "train"), idle_then(active_from=0)),
]


def replicaset_owners():
    lines = ["# TYPE kube_replicaset_owner gauge"]
    for replicaset, deployment in (("notebook-5f7c9", "notebook"), ("infer-6b8d4", "infer")):
        labels = (
            f'{{namespace="vision",replicaset="{replicaset}",owner_kind="Deployment",'
            f'owner_name="{deployment}",owner_is_controller="true"}}'
        )
        moment = T0 - timedelta(minutes=2)
        while moment < END:
            lines.append(f"kube_replicaset_owner{labels} 1 {int(moment.timestamp())}")
            moment += timedelta(minutes=1)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    require_prometheus()
    directory = tmp_path_factory.mktemp("idle-prometheus")
    text = openmetrics([], PODS, T0 - timedelta(minutes=2), END)
    text = text.replace("# EOF\n", replicaset_owners() + "# EOF\n")
    load_openmetrics(text, str(directory))
    with running_prometheus(str(directory)) as url:
        yield url


@pytest.fixture
def prometheus(settings, prometheus_url):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    return prometheus_url


def queries_served(url):
    """Prometheus' own count of the queries it evaluated."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(
                'prometheus_engine_query_duration_seconds_count{slice="inner_eval"}'
            ):
                return int(float(line.split()[-1]))
    raise AssertionError("no query count in Prometheus' metrics")


def run(minutes):
    """Evaluate at T0 + each minute of `minutes`, as beat would."""
    return {m: actions.evaluate(T0 + timedelta(minutes=m)) for m in minutes}


def log():
    return list(
        IdleAction.objects.order_by("at", "pk").values_list(
            "workload_kind", "workload_name", "kind", "at"
        )
    )


def at(minute):
    return T0 + timedelta(minutes=minute)


@pytest.fixture
def policy(admin_user, h100, vision):
    return actions.set_policy(
        h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report"
    )


def test_report_only_announces_logs_what_it_would_do_and_acts_on_nothing(
    prometheus, policy, carol, vision
):
    actions.exempt(
        vision,
        namespace="vision",
        kind="StatefulSet",
        name="db",
        until=at(60),
        reason="the nightly load fills it",
        by=carol,
    )
    results = run(range(1, 21))
    assert results[1].workloads == 5
    assert log() == [
        ("Deployment", "infer", "announced", at(11)),
        ("Deployment", "notebook", "announced", at(11)),
        ("Pod", "scratch", "announced", at(11)),
        ("Deployment", "infer", "withdrawn", at(13)),
        ("Deployment", "notebook", "would_act", at(16)),
        ("Pod", "scratch", "would_act", at(16)),
    ]
    notebook = IdleState.objects.get(name="notebook")
    assert (notebook.idle_since, notebook.action_due_at, notebook.gpus) == (at(1), at(16), 2)
    assert not IdleState.objects.get(name="infer").announced_at
    assert not IdleAction.objects.filter(workload_name__in=["db", "train"]).exists()
    would = IdleAction.objects.get(workload_name="notebook", kind="would_act")
    assert would.gpu_hours(at(20)) == 2 * 4 / 60  # 2 GPUs idle 4 minutes past the grace


def test_each_evaluation_asks_prometheus_two_queries(prometheus, policy):
    before = queries_served(prometheus)
    run(range(1, 4))
    assert queries_served(prometheus) - before == 2 * 3


def test_an_evaluation_run_twice_in_a_minute_changes_nothing(prometheus, policy):
    run(range(1, 17))
    rows = log()
    run([16, 16])
    assert log() == rows


def test_a_team_policy_stricter_than_the_flavors_announces_sooner(
    prometheus, policy, carol, vision, h100
):
    actions.set_policy(h100, vision, by=carol, idle_minutes=5, grace_minutes=5, mode="report")
    run(range(1, 7))
    assert ("Deployment", "notebook", "announced", at(6)) in log()


def test_the_notice_reaches_the_teams_webhook_with_the_time_of_the_action(
    prometheus, policy, carol, vision, settings
):
    from notifications import actions as notification_actions
    from notifications.models import Delivery

    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    notification_actions.set_webhook(vision, "http://127.0.0.1:9/idle", by=carol)
    run(range(1, 14))
    bodies = {d.event: [] for d in Delivery.objects.all()}
    for delivery in Delivery.objects.order_by("pk"):
        bodies[delivery.event].append(delivery.body)
    assert len(bodies["idle_announced"]) == 4  # notebook, infer, db (not exempt here), scratch
    notebook = next(b for b in bodies["idle_announced"] if "notebook" in b)
    assert "report only" in notebook and "2026-11-02 10:16 UTC" in notebook
    assert "infer" in bodies["idle_withdrawn"][0]
