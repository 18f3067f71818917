"""A batch job's outcome reaches its team's webhook (kubesim over HTTP, tasks inline,
a real receiver checking the signature)."""

from batch import actions, launch
from batch.models import BatchJob
from notifications import actions as hooks
from notifications.models import Delivery
from tests.batch.test_cluster import submit, watch_until
from tests.notifications.conftest import receiver, verify  # noqa: F401 (fixture)
from tests.waiting import wait_for


def test_a_finished_job_is_posted_to_the_teams_webhook(
    setup,
    demo_flavors,
    backend,
    receiver,  # noqa: F811 (the imported fixture)
    settings,
):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    _, secret = hooks.set_webhook(setup["team"], receiver.url, by=setup["admin"])
    job = submit(setup, demo_flavors["h100"])
    actions.replan()
    launch.release_due()
    watch_until(job, {BatchJob.Status.SUCCEEDED}, backend, advance_by=120)

    def outcome_posted():
        return [r for r in receiver.requests() if r.headers["X-Portal-Event"].startswith("batch")]

    (posted,) = wait_for(outcome_posted)
    assert posted.headers["X-Portal-Event"] == "batch_job_succeeded"
    assert verify(secret, posted.headers, posted.body)
    assert posted.json["text"].startswith(f"Batch job #{job.pk} “train” of Vision: succeeded")
    payload = posted.json["metadata"]["event_payload"]
    assert payload["batch_job"] == job.pk and payload["used_gpu_seconds"] > 0
    assert Delivery.objects.get(event="batch_job_succeeded").status == "delivered"
