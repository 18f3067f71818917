# ruff: noqa: F811 - the provisioning fixtures, imported, are parameters here
"""The ClusterRole in deploy/ grants exactly what the portal does on a
cluster: every (API group, resource, verb) the portal's requests need is
granted, and every one granted was needed, so no rule can go without
breaking something and none is there for nothing.

The portal's whole cluster life runs against kubesim (first sync, an
update, the drift check, the inventory, archiving and deleting a namespace)
and kubesim's request log says what each request was, as an API server's
authorizer sees it. A server-side apply that creates its object is
authorized as `create` (as on a real API server); a RoleBinding to the `edit`
ClusterRole needs `bind` on it."""

from pathlib import Path

import yaml
from django.utils import timezone

from batch import actions as batch_actions
from batch import cluster as batch_cluster
from batch.models import BatchJob
from cluster import actions as cluster_actions
from gpu_requests import actions as quota_actions
from provisioning import actions
from tests.batch.conftest import open_now, setup  # noqa: F401 - fixtures
from tests.batch.test_cluster import submit as submit_job
from tests.batch.test_cluster import watch_until
from tests.factories import submit
from tests.provisioning.conftest import cluster, demo_flavors, eager, kubesim  # noqa: F401

ROLE = Path(__file__).resolve().parents[2] / "deploy" / "base" / "clusterrole.yaml"


def granted():
    rules = yaml.safe_load(ROLE.read_text())["rules"]
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [None])
    }


def group_of(path):
    return "" if path.startswith("/api/") else path.split("/")[2]


def used(requests, role_bindings):
    needed = set()
    for r in requests:
        resource = r["resource"] + (f"/{r['subresource']}" if r.get("subresource") else "")
        key = (group_of(r["path"]), resource)
        needed.add((*key, r["verb"], None))
        if r["verb"] == "patch" and r["status"] == 201:
            needed.add((*key, "create", None))  # server-side apply creating it
    for binding in role_bindings:
        role = binding["roleRef"]
        needed.add(("rbac.authorization.k8s.io", "clusterroles", "bind", role["name"]))
    return needed


def test_the_cluster_role_is_exactly_what_the_portal_uses(
    setup, demo_flavors, kubesim, cluster, django_capture_on_commit_callbacks
):
    team, alice, admin = setup["team"], setup["alice"], setup["admin"]
    kubesim.clear_requests()
    # Quota (tasks run inline): the first sync creates the team's objects, the second updates.
    for flavor, gpus in (("h100", 4), ("a100", 2)):
        with django_capture_on_commit_callbacks(execute=True):
            quota_request = submit(
                team, demo_flavors[flavor], alice, gpus=gpus, starts_at=timezone.now()
            )
            quota_actions.approve(quota_request, by=admin)
        actions.sync_team(team.pk)
    actions.check_drift()
    cluster_actions.record_inventory()
    # Batch: a Job created suspended, released, watched to its end (events,
    # pods and the log read), another cancelled (deleted).
    job = submit_job(setup, demo_flavors["h100"])
    batch_actions.replan(reason="test")
    batch_cluster.release_due()
    watch_until(job, {BatchJob.Status.RUNNING}, kubesim)
    watch_until(job, {BatchJob.Status.SUCCEEDED}, kubesim, advance_by=120)
    other = submit_job(setup, demo_flavors["h100"])
    batch_actions.replan(reason="test")
    batch_actions.cancel(other, by=alice)
    portal_requests = kubesim.requests()
    role_bindings = cluster.list("RoleBinding", namespace="vision")  # the test's, not counted
    kubesim.clear_requests()
    quota_actions.archive_team(team, by=admin)
    actions.sync_team(team.pk)
    actions.delete_namespace(team, by=admin)
    portal_requests += kubesim.requests()

    assert used(portal_requests, role_bindings) == granted()
