"""The status watch on both cluster backends over HTTP: it resumes from the stored
resourceVersion (a WATCH, no LIST), a version too old for the server (410 Gone:
older than the API server's watch cache, or than kubesim's compacted history)
makes the next run list again,
so does the periodic relist (PORTAL_BATCH_RELIST_SECONDS), which finds what a
watch missed, and a pod the scheduler cannot place shows its FailedScheduling on the job page."""

from datetime import timedelta

from django.db.models import F

from batch import actions, launch, watch
from batch.models import BatchJob, WatchState
from cluster import kube
from tests.batch.test_cluster import status_of, submit
from tests.provisioning.conftest import wait_for

Status = BatchJob.Status


def job_calls(backend):
    """The verbs of the calls on Jobs across namespaces (the watch's own)."""
    return [
        r["verb"]
        for r in backend.requests()
        if r["resource"] == "jobs" and r["namespace"] is None and r["verb"] in ("list", "watch")
    ]


def stored_version():
    return WatchState.objects.values_list("resource_version", flat=True).get(pk=1)


def test_it_resumes_from_the_stored_resource_version(setup, demo_flavors, backend):
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    backend.clear_requests()
    assert watch.watch_jobs(seconds=1) == 1  # no version yet: a LIST
    assert job_calls(backend) == ["list"]
    listed = stored_version()
    assert listed

    launch.release_due()
    backend.clear_requests()

    def running():
        watch.watch_jobs(seconds=1)
        return status_of(job) == Status.RUNNING

    wait_for(running, timeout=30)
    # Only WATCHes from the stored version, which moved on with the events seen.
    calls = job_calls(backend)
    assert calls and set(calls) == {"watch"}
    assert int(stored_version()) > int(listed)


def test_a_version_too_old_410_gone_lists_again(setup, demo_flavors, backend):
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    watch.watch_jobs(seconds=1)
    launch.release_due()
    # The server forgets its watch history: the stored version is now too old.
    backend.expire_watch_history()
    backend.clear_requests()

    assert watch.watch_jobs(seconds=1) == 0
    assert job_calls(backend) == ["watch"]
    assert stored_version() == ""  # 410 Gone: forget it
    assert status_of(job) == Status.RELEASED  # nothing was seen yet

    def relisted():
        watch.watch_jobs(seconds=1)
        return status_of(job) == Status.RUNNING

    wait_for(relisted, timeout=30)
    calls = job_calls(backend)
    assert calls[:2] == ["watch", "list"]  # the LIST after the 410 found the change
    assert stored_version()


def test_the_periodic_relist_finds_what_the_watch_missed(
    setup, demo_flavors, cluster, backend, settings
):
    settings.PORTAL_BATCH_RELIST_SECONDS = 300
    job = submit(setup, demo_flavors["h100"], parallelism=1, completions=1)
    actions.replan()
    watch.watch_jobs(seconds=1)  # the first LIST
    launch.release_due()

    def completed():
        live = cluster.get("Job", f"batch-{job.pk}", "vision")
        return any(c["type"] == "Complete" for c in live["status"].get("conditions") or [])

    wait_for(completed, timeout=30, every=lambda: backend.pass_time(300))
    # The Job's events are lost to the watch (as when a worker died after its WATCH
    # moved past them): the stored version is already the server's latest.
    _, latest = cluster.list_versioned("Job", label_selector=watch.SELECTOR)
    WatchState.objects.update(resource_version=latest)
    backend.clear_requests()
    assert watch.watch_jobs(seconds=1) == 0
    assert job_calls(backend) == ["watch"]
    assert status_of(job) == Status.RELEASED

    # The last LIST is older than PORTAL_BATCH_RELIST_SECONDS: this run lists again.
    WatchState.objects.update(listed_at=F("listed_at") - timedelta(seconds=301))
    backend.clear_requests()
    assert watch.watch_jobs(seconds=1) == 1
    assert job_calls(backend) == ["list"]
    assert status_of(job) == Status.SUCCEEDED
    listed_at = WatchState.objects.values_list("listed_at", flat=True).get(pk=1)
    backend.clear_requests()
    watch.watch_jobs(seconds=1)  # relisted just now: back to watching
    assert job_calls(backend) == ["watch"]
    assert WatchState.objects.values_list("listed_at", flat=True).get(pk=1) == listed_at


def test_failed_scheduling_is_shown_on_the_job_page(setup, demo_flavors, cluster, client):
    # The H100 nodes are cordoned: the scheduler cannot place the job's pod.
    job = submit(setup, demo_flavors["h100"], parallelism=1, completions=1)
    nodes = [
        node
        for node in cluster.list("Node")
        if node["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3"
    ]
    for node in nodes:
        cluster.call(
            "PATCH",
            cluster.path("Node", node["metadata"]["name"]),
            body={"spec": {"unschedulable": True}},
            content_type="application/merge-patch+json",
        )
    actions.replan()
    launch.release_due()

    def shown():
        watch.record(
            cluster.get("Job", f"batch-{job.pk}", "vision"), cluster=kube.cluster()
        )  # as the portal
        events = BatchJob.objects.values_list("cluster_events", flat=True).get(pk=job.pk)
        return [e for e in events if e["reason"] == "FailedScheduling"]

    (event,) = wait_for(shown, timeout=30)
    client.force_login(setup["alice"])
    page = client.get(f"/batch/jobs/{job.pk}/").content.decode()
    assert "FailedScheduling" in page
    assert "node(s) were unschedulable" in event["message"]
    assert "2 node(s) were unschedulable" in page


def test_a_job_labelled_as_a_batch_job_but_not_its_job_speaks_for_nothing(
    setup, demo_flavors, backend, caplog
):
    """The label names a batch job, but anyone with `edit` in a namespace can put it
    on a Job of theirs: a Job speaks for batch job N only as `batch-N` in its team's
    namespace. A finished Job elsewhere, so labelled, finishes nothing."""
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    launch.release_due()
    assert status_of(job) == Status.RELEASED
    labels = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/batch-job": str(job.pk)}
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    for namespace, name in (("nlp", f"batch-{job.pk}"), ("vision", "my-own"), ("nlp", "x")):
        forged = {
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "status": done,
        }
        backend.clear_requests()
        assert watch.record(forged, cluster=kube.cluster()) is None
        assert backend.requests() == []  # not even its events read
        assert f"Job {namespace}/{name} is labelled gpu-portal.io/batch-job" in caplog.text
    assert status_of(job) == Status.RELEASED
