"""The dashboard's cluster figures say how old they are, that approved quota is
on its way until the inventory sees it, and "At the limit" only when the
cluster refuses pods. Through kubesim, the real sync and the inventory task."""

from datetime import timedelta

import pytest
import time_machine
import yaml
from django.utils import timezone

from cluster import actions as cluster_actions
from gpu_requests import actions as quota_actions
from provisioning import actions
from tests.factories import submit
from tests.provisioning.test_namespace_usage import (
    KUBECTL,
    example_of,
    kubectl_apply,
    vision_h100,  # noqa: F401
    wait_until_used,
)


def usage_of(client):
    page = client.get("/").content.decode()
    return page[page.index('id="usage-vision"') : page.index("<h3>Quota</h3>")]


def test_approved_quota_is_on_its_way_until_the_inventory_sees_it(
    client,
    alice,
    admin_user,
    vision,
    vision_h100,  # noqa: F811
    cluster,
):
    client.force_login(alice)
    cluster_actions.record_inventory()
    assert "2 free" in usage_of(client)

    more = submit(vision, vision_h100, alice, gpus=2, starts_at=timezone.now())
    quota_actions.approve(more, by=admin_user)
    usage = usage_of(client)
    assert "Quota on its way" in usage
    assert "4 approved; the cluster showed 2 when last read" in usage

    actions.sync_team(vision.pk)
    assert "Quota on its way" in usage_of(client)  # synced, but not read back yet
    cluster_actions.record_inventory()
    usage = usage_of(client)
    assert "Quota on its way" not in usage and "4 free" in usage
    assert "As the cluster reported 0" in usage

    with time_machine.travel(timezone.now() + timedelta(minutes=10)):
        usage = usage_of(client)
    assert "Stale: the cluster last reported 10" in usage
    assert "the inventory has not read the namespace since" in usage


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_quota_in_full_use_is_not_at_the_limit_until_a_pod_is_refused(
    client,
    alice,
    vision,
    vision_h100,  # noqa: F811
    cluster,
    backend,
):
    client.force_login(alice)
    job = yaml.safe_load(example_of(client, vision, vision_h100))
    job["spec"].update(parallelism=2, completions=2)
    job["spec"]["template"]["metadata"] = {"annotations": {"kubesim.io/duration": "1h"}}
    kubectl_apply(backend, "vision", yaml.safe_dump(job))
    wait_until_used(cluster, "2")
    cluster_actions.record_inventory()
    usage = usage_of(client)
    assert "All 2 in use" in usage
    assert "At the limit" not in usage
