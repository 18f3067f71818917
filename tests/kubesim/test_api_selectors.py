"""labelSelector and fieldSelector on lists."""

import pytest
from kubernetes import client


@pytest.fixture
def pods(core):
    for name, labels, node in [
        ("a", {"app": "web", "tier": "front"}, "n1"),
        ("b", {"app": "web", "tier": "back"}, "n2"),
        ("c", {"app": "db"}, None),
    ]:
        spec = {"containers": [{"name": "c", "image": "x:1"}]}
        if node:
            spec["nodeName"] = node
        core.create_namespaced_pod(
            "default", {"metadata": {"name": name, "labels": labels}, "spec": spec}
        )


def names(pod_list):
    return sorted(p.metadata.name for p in pod_list.items)


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c"]),
        ("tier in (front,middle)", ["a"]),
        ("tier notin (front)", ["b", "c"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c"]),
        ("app=web,tier=back", ["b"]),
    ],
)
def test_label_selectors(core, pods, selector, expected):
    assert names(core.list_namespaced_pod("default", label_selector=selector)) == expected


def test_field_selectors(core, pods):
    assert names(core.list_namespaced_pod("default", field_selector="spec.nodeName=n1")) == ["a"]
    assert names(core.list_namespaced_pod("default", field_selector="metadata.name!=a")) == [
        "b",
        "c",
    ]
    assert names(core.list_pod_for_all_namespaces(field_selector="status.phase=Pending")) == [
        "a",
        "b",
        "c",
    ]
    assert names(core.list_namespaced_pod("default", field_selector="spec.nodeName=")) == ["c"]


def test_event_field_selectors(core):
    for name, kind in [("e1", "Pod"), ("e2", "Job")]:
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": name},
                "reason": "R",
                "message": "m",
                "involvedObject": {"kind": kind, "name": "x", "namespace": "default", "uid": name},
            },
        )
    selected = core.list_namespaced_event(
        "default", field_selector="involvedObject.kind=Job,involvedObject.name=x"
    )
    assert [e.metadata.name for e in selected.items] == ["e2"]


def test_unknown_field_selector_is_bad_request(core):
    with pytest.raises(client.ApiException) as error:
        core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert error.value.status == 400


def test_list_metadata(core, pods):
    pod_list = core.list_namespaced_pod("default")
    assert pod_list.kind == "PodList"
    assert pod_list.api_version == "v1"
    assert int(pod_list.metadata.resource_version) >= 3
