"""Lists: limit/continue pagination over a consistent snapshot, resourceVersion
semantics and the apiserver's errors for bad or expired tokens."""

import json

import pytest
from kubernetes import client

from tests.kubesim.apihelpers import job_manifest, sim_request, status_body


@pytest.fixture
def five_jobs(batch):
    for name in ("a", "b", "c", "d", "e"):
        batch.create_namespaced_job("default", job_manifest(name, suspend=True))


def names(jobs):
    return [j.metadata.name for j in jobs.items]


def test_limit_and_continue_page_through_everything(five_jobs, batch):
    first = batch.list_namespaced_job("default", limit=2)
    assert names(first) == ["a", "b"]
    assert first.metadata.remaining_item_count == 3
    second = batch.list_namespaced_job("default", limit=2, _continue=first.metadata._continue)
    assert names(second) == ["c", "d"]
    assert second.metadata.remaining_item_count == 1
    third = batch.list_namespaced_job("default", limit=2, _continue=second.metadata._continue)
    assert names(third) == ["e"]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None
    assert first.metadata.resource_version == third.metadata.resource_version


def test_later_pages_show_the_first_pages_snapshot(five_jobs, batch):
    first = batch.list_namespaced_job("default", limit=2)
    batch.delete_namespaced_job("d", "default")
    batch.create_namespaced_job("default", job_manifest("c2", suspend=True))
    batch.patch_namespaced_job("e", "default", {"metadata": {"labels": {"late": "yes"}}})
    rest = batch.list_namespaced_job("default", _continue=first.metadata._continue)
    assert names(rest) == ["c", "d", "e"]
    assert rest.items[2].metadata.labels in (None, {})
    assert rest.metadata.resource_version == first.metadata.resource_version
    assert names(batch.list_namespaced_job("default")) == ["a", "b", "c", "c2", "e"]


def test_a_continue_token_past_compaction_is_gone_with_an_inconsistent_token(
    kubesim, five_jobs, batch
):
    first = batch.list_namespaced_job("default", limit=2)
    batch.delete_namespaced_job("c", "default")
    kubesim.store.compact()
    with pytest.raises(client.ApiException) as error:
        batch.list_namespaced_job("default", limit=2, _continue=first.metadata._continue)
    assert error.value.status == 410
    body = status_body(error.value)
    assert body["reason"] == "Expired"
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )
    rest = batch.list_namespaced_job("default", _continue=body["metadata"]["continue"])
    assert names(rest) == ["d", "e"]  # the current state after "b"


def test_an_exact_resource_version_lists_that_snapshot(five_jobs, batch):
    before = batch.list_namespaced_job("default").metadata.resource_version
    batch.delete_namespaced_job("a", "default")
    old = batch.list_namespaced_job(
        "default", resource_version=before, resource_version_match="Exact"
    )
    assert names(old) == ["a", "b", "c", "d", "e"]
    assert old.metadata.resource_version == before
    assert names(batch.list_namespaced_job("default", resource_version="0")) == [
        "b",
        "c",
        "d",
        "e",
    ]


def test_selectors_page_without_a_remaining_count(batch):
    for name in ("a", "b", "c"):
        batch.create_namespaced_job("default", job_manifest(name, suspend=True, labels={"t": "x"}))
    batch.create_namespaced_job("default", job_manifest("z", suspend=True))
    page = batch.list_namespaced_job("default", limit=2, label_selector="t=x")
    assert names(page) == ["a", "b"] and page.metadata.remaining_item_count is None
    rest = batch.list_namespaced_job(
        "default", limit=2, label_selector="t=x", _continue=page.metadata._continue
    )
    assert names(rest) == ["c"]


def test_all_namespaces_pages_in_key_order(core, batch):
    for namespace in ("team", "team-a"):
        core.create_namespace({"metadata": {"name": namespace}})
        batch.create_namespaced_job(namespace, job_manifest("j", suspend=True))
    page = batch.list_job_for_all_namespaces(limit=1)
    rest = batch.list_job_for_all_namespaces(_continue=page.metadata._continue)
    # etcd keys sort "team-a/j" before "team/j" ('-' < '/').
    assert [j.metadata.namespace for j in page.items + rest.items] == ["team-a", "team"]


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        (
            "resourceVersion=abc",
            400,
            'invalid resource version: resourceVersion: Invalid value: "abc": '
            'strconv.ParseUint: parsing "abc": invalid syntax',
        ),
        ("limit=x", 400, 'strconv.ParseInt: parsing "x": invalid syntax'),
        (
            "continue=bm90LWpzb24",
            400,
            "invalid continue token: continue key is not valid",
        ),
        (
            "resourceVersionMatch=Exact",
            422,
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "sendInitialEvents=true",
            422,
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
            "sendInitialEvents is only supported on watch requests",
        ),
    ],
)
def test_bad_list_options_are_refused(kubesim, query, status, message):
    code, _, body = sim_request(kubesim, "GET", "/apis/batch/v1/namespaces/default/jobs?" + query)
    assert code == status
    assert json.loads(body)["message"].startswith(message)


def test_continue_with_a_resource_version_is_refused(kubesim, five_jobs, batch):
    token = batch.list_namespaced_job("default", limit=2).metadata._continue
    code, _, body = sim_request(
        kubesim,
        "GET",
        f"/apis/batch/v1/namespaces/default/jobs?continue={token}&resourceVersion=5",
    )
    assert code == 400
    assert json.loads(body)["message"] == (
        "specifying resource version is not allowed when using continue"
    )


def test_a_watch_with_an_invalid_resource_version_is_a_bad_request(kubesim):
    code, _, body = sim_request(
        kubesim, "GET", "/apis/batch/v1/namespaces/default/jobs?watch=true&resourceVersion=x"
    )
    assert code == 400
    assert json.loads(body)["message"] == (
        'resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax'
    )
