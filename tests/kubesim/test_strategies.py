"""Each kind's rules live in its strategy (kubesim/apiserver/strategies.py), which the
registry asks instead of testing the kind's name."""

import pytest
from kubernetes import client

from kubesim.apiserver.resources import RESOURCES
from kubesim.apiserver.strategies import Strategy

CONTAINERS = [{"name": "main", "image": "busybox"}]
TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": CONTAINERS}}
# plural: (API class, method suffix, object, a change of its spec, whether the real
# apiserver counts that change in metadata.generation)
KINDS = {
    "jobs": (
        client.BatchV1Api,
        "namespaced_job",
        {
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": CONTAINERS}},
            }
        },
        {"spec": {"activeDeadlineSeconds": 60}},
        True,
    ),
    "deployments": (
        client.AppsV1Api,
        "namespaced_deployment",
        {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}},
        {"spec": {"replicas": 2}},
        True,
    ),
    "networkpolicies": (
        client.NetworkingV1Api,
        "namespaced_network_policy",
        {"spec": {"podSelector": {}}},
        {"spec": {"podSelector": {"matchLabels": {"app": "x"}}}},
        True,
    ),
    "resourcequotas": (
        client.CoreV1Api,
        "namespaced_resource_quota",
        {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
        {"spec": {"hard": {"requests.nvidia.com/gpu": "4"}}},
        False,
    ),
    "limitranges": (
        client.CoreV1Api,
        "namespaced_limit_range",
        {"spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}},
        {"spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]}},
        False,
    ),
}


def test_every_kind_served_has_a_strategy():
    for rtype in RESOURCES.values():
        assert isinstance(rtype.strategy, Strategy), rtype.plural


@pytest.mark.parametrize("plural", KINDS)
def test_a_spec_change_bumps_generation_only_where_the_strategy_tracks_it(api, plural):
    api_class, suffix, body, spec_change, counted = KINDS[plural]
    assert RESOURCES[plural].strategy.tracks_generation is counted
    kind_api = api_class(api)
    create, patch = (getattr(kind_api, f"{verb}_{suffix}") for verb in ("create", "patch"))

    created = create("default", {"metadata": {"name": "probe"}, **body})
    assert created.metadata.generation == (1 if counted else None)

    relabelled = patch("probe", "default", {"metadata": {"labels": {"team": "a"}}})
    assert relabelled.metadata.generation == created.metadata.generation

    changed = patch("probe", "default", spec_change)
    assert changed.metadata.generation == (2 if counted else None)
