"""Watch: initial state, changes since a resourceVersion, timeouts and 410 Gone."""

import threading
import time

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
