"""Watch: initial state, changes since a resourceVersion, timeouts and 410 Gone."""

import json
import threading
import time
import urllib.request

import pytest
from kubernetes import client, watch

from tests.kubesim.apihelpers import job_manifest


def collect(stream_fn, *, stop_after=None, **kwargs):
    events = []
    w = watch.Watch()
    for event in w.stream(stream_fn, **kwargs):
        events.append((event["type"], event["object"].metadata.name))
        if stop_after and len(events) >= stop_after:
            w.stop()
    return events


def test_watch_without_resource_version_starts_with_added_events(batch):
    batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    batch.create_namespaced_job("default", job_manifest("two", suspend=True))
    events = collect(batch.list_namespaced_job, namespace="default", timeout_seconds=1)
    assert events == [("ADDED", "one"), ("ADDED", "two")]


def test_watch_streams_changes_as_they_happen(batch):
    def write_later():
        time.sleep(0.2)
        batch.create_namespaced_job("default", job_manifest("late", suspend=True))
        batch.patch_namespaced_job("late", "default", {"metadata": {"labels": {"x": "y"}}})
        batch.delete_namespaced_job("late", "default")

    writer = threading.Thread(target=write_later)
    writer.start()
    started = time.monotonic()
    events = collect(
        batch.list_namespaced_job, namespace="default", timeout_seconds=5, stop_after=3
    )
    writer.join()
    assert events == [("ADDED", "late"), ("MODIFIED", "late"), ("DELETED", "late")]
    assert time.monotonic() - started < 3


def test_watch_from_a_resource_version_replays_later_events(batch):
    first = batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    batch.create_namespaced_job("default", job_manifest("two", suspend=True))
    events = collect(
        batch.list_namespaced_job,
        namespace="default",
        timeout_seconds=1,
        resource_version=first.metadata.resource_version,
    )
    assert events == [("ADDED", "two")]


def test_watch_honours_timeout_seconds(batch):
    started = time.monotonic()
    assert collect(batch.list_namespaced_job, namespace="default", timeout_seconds=1) == []
    assert 0.9 < time.monotonic() - started < 3


def test_watch_with_label_selector(batch):
    batch.create_namespaced_job("default", job_manifest("a", suspend=True, labels={"team": "a"}))
    batch.create_namespaced_job("default", job_manifest("b", suspend=True, labels={"team": "b"}))
    events = collect(
        batch.list_namespaced_job, namespace="default", timeout_seconds=1, label_selector="team=b"
    )
    assert events == [("ADDED", "b")]


def test_watch_from_a_compacted_resource_version_is_gone(kubesim, batch):
    old = batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    batch.create_namespaced_job("default", job_manifest("two", suspend=True))
    kubesim.store.compact()
    with pytest.raises(client.ApiException) as error:
        collect(
            batch.list_namespaced_job,
            namespace="default",
            timeout_seconds=1,
            resource_version=old.metadata.resource_version,
        )
    assert error.value.status == 410
    assert "too old resource version" in str(error.value)


def test_watch_request_is_logged(kubesim, batch):
    collect(batch.list_namespaced_job, namespace="default", timeout_seconds=1)
    assert [e["verb"] for e in kubesim.request_log if e["resource"] == "jobs"] == ["watch"]


def raw_events(stream_fn, **kwargs):
    """(type, raw object) of every event, bookmarks included."""
    return [(e["type"], e["raw_object"]) for e in watch.Watch().stream(stream_fn, **kwargs)]


def test_send_initial_events_ends_with_an_initial_events_end_bookmark(kubesim, batch):
    batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    batch.create_namespaced_job("default", job_manifest("two", suspend=True))
    events = raw_events(
        batch.list_namespaced_job,
        namespace="default",
        timeout_seconds=1,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    )
    assert [(t, o["metadata"].get("name")) for t, o in events] == [
        ("ADDED", "one"),
        ("ADDED", "two"),
        ("BOOKMARK", None),
    ]
    bookmark = events[2][1]
    assert bookmark["kind"] == "Job" and bookmark["apiVersion"] == "batch/v1"
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["metadata"]["resourceVersion"] == kubesim.store.resource_version


def test_send_initial_events_false_starts_from_now(batch):
    batch.create_namespaced_job("default", job_manifest("old", suspend=True))
    events = raw_events(
        batch.list_namespaced_job,
        namespace="default",
        timeout_seconds=1,
        send_initial_events=False,
        resource_version_match="NotOlderThan",
    )
    assert events == []


def test_send_initial_events_needs_resource_version_match(batch):
    with pytest.raises(client.ApiException) as error:
        raw_events(
            batch.list_namespaced_job,
            namespace="default",
            timeout_seconds=1,
            send_initial_events=True,
        )
    assert error.value.status == 422
    assert json.loads(error.value.body)["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    )


def test_periodic_bookmarks_carry_the_current_resource_version(kubesim, batch):
    kubesim.bookmark_interval = 0.2
    batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    events = raw_events(
        batch.list_namespaced_job,
        namespace="default",
        timeout_seconds=1,
        allow_watch_bookmarks=True,
    )
    assert events[0][0] == "ADDED"
    bookmarks = [o for t, o in events if t == "BOOKMARK"]
    assert len(bookmarks) >= 2 and {t for t, _ in events[1:]} == {"BOOKMARK"}
    assert {b["metadata"]["resourceVersion"] for b in bookmarks} == {kubesim.store.resource_version}
    assert all("annotations" not in b["metadata"] for b in bookmarks)


def test_no_bookmarks_unless_allowed(kubesim, batch):
    kubesim.bookmark_interval = 0.1
    events = raw_events(batch.list_namespaced_job, namespace="default", timeout_seconds=1)
    assert events == []


def test_watch_as_table_sends_full_rows_and_the_columns_once(kubesim, batch):
    batch.create_namespaced_job("default", job_manifest("one", suspend=True))
    batch.create_namespaced_job("default", job_manifest("two", suspend=True))
    request = urllib.request.Request(
        kubesim.url + "/apis/batch/v1/namespaces/default/jobs?watch=true&timeoutSeconds=1",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        events = [json.loads(line) for line in response.read().splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    first, second = (e["object"] for e in events)
    assert first["kind"] == second["kind"] == "Table"
    assert [c["name"] for c in first["columnDefinitions"]][:5] == [
        "Name",
        "Status",
        "Completions",
        "Duration",
        "Age",
    ]
    assert second["columnDefinitions"] is None
    assert second["rows"][0]["cells"][0:3:2] == ["two", "0/1"]  # no controller: no status
    assert second["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
