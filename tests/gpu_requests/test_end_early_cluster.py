"""Quota given back is freed at once, on both cluster backends: the team's
ResourceQuota shrinks (the provisioning sync, by a real Celery worker) and the
review queue's capacity bar shows the GPUs free for the next request."""

import pytest
from django.test import Client
from django.utils import timezone

from gpu_requests import actions
from tests.factories import TeamFactory, UserFactory, add_member, make_reviewer, submit
from tests.provisioning.conftest import demo_flavors, redis_url, workers  # noqa: F401
from tests.provisioning.test_worker_sync import caps, hard, in_sync
from tests.waiting import wait_for

pytestmark = pytest.mark.celery


def test_giving_quota_back_shrinks_the_namespace_quota_and_frees_the_capacity(
    workers,  # noqa: F811
    cluster,
    demo_flavors,  # noqa: F811
):
    workers.start()
    h100 = demo_flavors["h100"]  # 16 on the demo cluster
    speech = TeamFactory(slug="speech", name="Speech")
    dave = add_member(speech, UserFactory(username="dave"), role="manager")
    admin = make_reviewer("admin")
    held = actions.approve(
        submit(speech, h100, dave, gpus=12, starts_at=timezone.now(), hours=24 * 30), by=admin
    )
    wait_for(lambda: in_sync(speech) and hard(cluster, "speech") == caps("12"), timeout=30)
    vision = TeamFactory(slug="vision", name="Vision")
    alice = add_member(vision, UserFactory(username="alice"))
    waiting = submit(vision, h100, alice, gpus=8, starts_at=timezone.now(), hours=24)
    reviewer = Client()
    reviewer.force_login(admin)
    assert '12</span> → <strong class="num">20</strong> of 16 GPUs' in (
        reviewer.get("/review/").content.decode()
    )

    manager = Client()
    manager.force_login(dave)
    manager.post(f"/requests/{held.pk}/end-early/", {"next": "/"})

    wait_for(lambda: hard(cluster, "speech") == caps("0"), timeout=30)
    queue = reviewer.get("/review/").content.decode()
    assert '0</span> → <strong class="num">8</strong> of 16 GPUs' in queue
    # And the request it made room for is approved.
    assert actions.approve(waiting, by=admin).status == "active"
