"""A real Prometheus holding a history of DCGM and kube-state-metrics series
(tests/billing/history.py) for the idle tests, and helpers to step the
evaluation through it minute by minute as beat would."""

import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from idle import actions
from idle.models import IdleAction
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
