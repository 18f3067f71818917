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

import pytest
import yaml
from django.utils import timezone

from cluster import actions as cluster_actions
from gpu_requests import actions as quota_actions
from provisioning import actions
from tests.factories import submit
from tests.provisioning.conftest import cluster, demo_flavors, kubesim  # noqa: F401

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
        key = (group_of(r["path"]), r["resource"])
        needed.add((*key, r["verb"], None))
        if r["verb"] == "patch" and r["status"] == 201:
            needed.add((*key, "create", None))  # server-side apply creating it
    for binding in role_bindings:
        role = binding["roleRef"]
        needed.add(("rbac.authorization.k8s.io", "clusterroles", "bind", role["name"]))
    return needed


@pytest.fixture(autouse=True)
def no_worker(monkeypatch):
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)


def test_the_cluster_role_is_exactly_what_the_portal_uses(
    vision, alice, admin_user, demo_flavors, kubesim, cluster, django_capture_on_commit_callbacks
):
    kubesim.clear_requests()
    with django_capture_on_commit_callbacks(execute=True):
        first = submit(vision, demo_flavors["h100"], alice, gpus=4, starts_at=timezone.now())
        quota_actions.approve(first, by=admin_user)
    actions.sync_team(vision.pk)  # creates the namespace and its objects
    with django_capture_on_commit_callbacks(execute=True):
        more = submit(vision, demo_flavors["a100"], alice, gpus=2, starts_at=timezone.now())
        quota_actions.approve(more, by=admin_user)
    actions.sync_team(vision.pk)  # updates them
    actions.check_drift()
    cluster_actions.record_inventory()
    portal_requests = kubesim.requests()
    role_bindings = cluster.list("RoleBinding", namespace="vision")  # the test's, not counted
    kubesim.clear_requests()
    quota_actions.archive_team(vision, by=admin_user)
    actions.sync_team(vision.pk)
    actions.delete_namespace(vision, by=admin_user)
    portal_requests += kubesim.requests()

    assert used(portal_requests, role_bindings) == granted()
