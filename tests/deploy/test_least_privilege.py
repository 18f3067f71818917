# ruff: noqa: F811 - the batch and provisioning fixtures, imported, are parameters here
"""The ClusterRole in deploy/ is exactly what the portal needs, proved against
enforcement: kubesim authenticates the portal as its ServiceAccount and
authorizes every request by RBAC (the `kubesim` fixture of
tests/provisioning/conftest.py).

- With the role as deployed, the portal's whole cluster life (first sync, an
  update, the drift check, a drift repaired (the sync reads every object), the
  inventory, a batch Job created suspended,
  released, watched to its end with its events, pods and log read, another
  cancelled, the team archived and its namespace deleted) succeeds and kubesim
  refuses nothing; nor does the real API server with deploy/'s admission policy
  in force (the namespaces the portal may change and delete, which RBAC cannot
  say).
- Without any one rule, or one verb, resource or resource name of a rule, some
  request of that life is refused with 403, and it is one the missing grant
  would have allowed (kubesim's request log says what authorization refused).
- Every grant is used: kubesim's request log, read as an authorizer does
  (a server-side apply that creates is `create` too, a RoleBinding to `edit`
  needs `bind` on it), covers the role exactly, so nothing is there for nothing.
"""

import contextlib
from decimal import Decimal

import pytest
from django.utils import timezone

from batch import actions as batch_actions
from batch import launch, watch
from batch.models import BatchJob
from billing import actions as billing_actions
from billing.actions import hour_floor
from cluster import actions as cluster_actions
from cluster import kube
from cluster.models import Flavor, GpuNode
from gpu_requests import actions as quota_actions
from idle import workloads as idle_workloads
from kubesim.apiserver.auth import Attributes, rule_allows
from provisioning import actions
from provisioning.models import TeamSync
from teams import actions as team_actions
from tests.batch.conftest import open_now, setup  # noqa: F401 - fixtures
from tests.batch.test_cluster import status_of
from tests.batch.test_cluster import submit as submit_job
from tests.billing.ledger import meter
from tests.clusters import deployed
from tests.factories import submit
from tests.provisioning.conftest import (  # noqa: F401 - fixtures
    demo_flavors,
    eager,
)
from tests.waiting import wait_for

Status = BatchJob.Status


def refusals(backend):
    """The portal's requests refused (403; or 422 where the registry checked that the
    portal may read an admission policy's parameters), with what authorization refused."""
    return [
        r
        for r in backend.requests()
        if (r["status"] == 403 or r.get("forbidden")) and r.get("user") == backend.portal_user
    ]


def watch_until(job, wanted, backend, *, advance_by=0):
    """Follow the Jobs until `job` is in `wanted`; stop early once kubesim refuses."""

    def reached():
        watch.watch_jobs(seconds=1)
        return status_of(job) in wanted or bool(refusals(backend))

    every = (lambda: backend.pass_time(advance_by)) if advance_by else None
    wait_for(reached, timeout=30, every=every)


def _scalable(kind):
    labels = {"app": "notebook"}
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "main", "image": "jupyter/base-notebook"}]},
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = "notebook"
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "notebook", "namespace": "vision"},
        "spec": spec,
    }


def portal_life(setup, flavors, backend, capture):
    """The portal's cluster life, step by step (tasks inline): yields each step's name
    after running it. A step's cluster error is swallowed; the caller decides."""
    team, alice, admin = setup["team"], setup["alice"], setup["admin"]

    def approve(flavor, gpus):
        with capture(execute=True):
            quota_request = submit(
                team, flavors[flavor], alice, gpus=gpus, starts_at=timezone.now()
            )
            quota_actions.approve(quota_request, by=admin)
        actions.sync_team(team.pk)

    jobs = {}

    def create_job():
        jobs["job"] = submit_job(setup, flavors["h100"])
        batch_actions.replan(reason="test")

    def run_job():
        launch.release_due()
        watch_until(jobs["job"], {Status.RUNNING}, backend)
        watch_until(jobs["job"], {Status.SUCCEEDED}, backend, advance_by=120)

    def cancel_job():
        jobs["other"] = submit_job(setup, flavors["h100"])
        batch_actions.replan(reason="test")
        batch_actions.cancel(jobs["other"], by=alice)

    def repair_drift():
        # Someone edits the team's objects; the drift check has the next sync read them.
        outsider = kube.Cluster(kube.load_configuration(backend.admin_kubeconfig), timeout=10)
        try:
            outsider.call(
                "PATCH",
                outsider.path("ResourceQuota", "gpu-quota", "vision"),
                body={"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}},
                content_type="application/merge-patch+json",
            )
        finally:
            outsider.close()
        actions.check_drift()
        actions.sync_team(team.pk)

    def inventory_with_dra():
        # A DRA flavor in the catalog: the inventory reads DeviceClasses,
        # ResourceSlices and ResourceClaims (kubesim answers 404, after RBAC).
        dra = Flavor(
            slug="h100-dra",
            name="H100 DRA",
            gpu_model="H100",
            memory_gb=80,
            device_class="gpu.nvidia.com",
            capacity=0,
            price_per_gpu_hour=1,
        )
        dra.full_clean()
        dra.save()
        cluster_actions.record_inventory()

    def dra_batch_job():
        # A batch job of the DRA flavor: its Job, then its claim template (created
        # on a real server; 404 on kubesim, which serves no resource.k8s.io).
        dra = Flavor.objects.get(slug="h100-dra")
        cluster_actions.set_capacity_override(dra, 2, by=admin)
        dra.refresh_from_db()
        window = setup["window"]
        batch_actions.save_window(
            None,
            by=admin,
            capacity={dra: 2},
            name="DRA",
            timezone="UTC",
            days=window.days,
            start_time=window.start_time,
            end_time=window.end_time,
            exceptions=[],
            price_factor="0.5",
            spot_allowed=False,
        )
        jobs["dra"] = submit_job(setup, dra, parallelism=1, completions=1)
        batch_actions.replan(reason="test")

    def dra_batch_job_cancelled():
        batch_actions.cancel(jobs["dra"], by=alice)

    def idle_scale_to_zero_and_back():
        # An idle policy's action on a notebook Deployment and a StatefulSet (the
        # admin makes them).
        outsider = kube.Cluster(kube.load_configuration(backend.admin_kubeconfig), timeout=10)
        for kind in idle_workloads.SCALABLE:
            outsider.apply(_scalable(kind), field_manager="tests")
            previous = idle_workloads.replicas(kind, "vision", "notebook")
            idle_workloads.scale_to_zero(kind, "vision", "notebook", previous=previous)
            idle_workloads.bring_back(kind, "vision", "notebook", replicas=previous)
        outsider.close()

    def budget_spent_and_lifted():
        # A team's hard budget spent (an hour of H100 on the ledger against 1.00): its
        # namespace gets the budget's quota; raised, the quota is deleted.
        meter(hour_floor(timezone.now()), teams={(team, flavors["h100"]): (3600, 3600, 0, 0)})
        with capture(execute=True):
            billing_actions.set_budget(team, Decimal(1), by=admin, mode="hard")
        actions.sync_team(team.pk)
        jobs["budget quota"] = backend_get("ResourceQuota", "gpu-budget-spent", "vision")
        with capture(execute=True):
            billing_actions.set_budget(team, Decimal(1000), by=admin, mode="hard")
        actions.sync_team(team.pk)

    def backend_get(kind, name, namespace):
        outsider = kube.Cluster(kube.load_configuration(backend.admin_kubeconfig), timeout=10)
        try:
            return outsider.get(kind, name, namespace)
        finally:
            outsider.close()

    def archive():
        team_actions.archive_team(team, by=admin)
        actions.sync_team(team.pk)
        actions.delete_namespace(team, by=admin)

    steps = [
        ("first sync", lambda: approve("h100", 4)),
        ("update", lambda: approve("a100", 2)),
        ("drift check", actions.check_drift),
        ("drift repaired", repair_drift),
        ("inventory", inventory_with_dra),
        ("DRA batch job created", dra_batch_job),
        ("DRA batch job cancelled", dra_batch_job_cancelled),
        ("batch job created", create_job),
        ("batch job run", run_job),
        ("batch job cancelled", cancel_job),
        ("budget spent and lifted", budget_spent_and_lifted),
        ("idle scale to zero and back", idle_scale_to_zero_and_back),
        ("archive and delete", archive),
    ]
    for name, step in steps:
        with contextlib.suppress(kube.ClusterError):
            step()
        yield name, jobs


def test_the_deployed_role_lets_the_portal_do_everything(
    setup, demo_flavors, backend, cluster, namespace_policy, django_capture_on_commit_callbacks
):
    """...and on the real API server, under deploy/'s admission policy too: it
    refuses nothing the portal does in the namespaces it made
    (tests/deploy/test_namespace_policy.py: what it refuses)."""
    team = setup["team"]
    jobs = {}
    for name, jobs in portal_life(setup, demo_flavors, backend, django_capture_on_commit_callbacks):
        assert refusals(backend) == [], name
        if name == "update":
            sync = TeamSync.objects.get(team=team)
            assert sync.status == TeamSync.Status.IN_SYNC
            assert (
                cluster.get("RoleBinding", "gpu-portal-team", "vision")["roleRef"]["name"] == "edit"
            )
        if name == "drift repaired":
            hard = cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"]
            assert hard["requests.nvidia.com/gpu"] == "6"  # 4 H100 and 2 A100, restored
        if name == "inventory":
            assert GpuNode.objects.exists()
        if name == "batch job run":
            job = BatchJob.objects.get(pk=jobs["job"].pk)
            assert job.status == Status.SUCCEEDED
            assert job.log_tail  # pods/log read
        if name == "batch job cancelled":
            assert cluster.get("Job", jobs["other"].kubernetes_name, "vision") is None
        if name == "budget spent and lifted":
            assert jobs["budget quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
            assert cluster.get("ResourceQuota", "gpu-budget-spent", "vision") is None
    assert TeamSync.objects.get(team=team).namespace_deleted_at is not None
    # Terminating, then gone once the namespace controller has emptied it.
    wait_for(
        lambda: cluster.get("Namespace", "vision") is None,
        timeout=60,
        every=lambda: backend.pass_time(30),
    )


def reductions(rules):
    """(what is missing, the rules without it, a rule granting just what is missing)
    for every rule, and every verb, resource, API group and resource name of a rule
    that has more than one."""
    for index, rule in enumerate(rules):
        label = f"{','.join(rule['resources'])}"
        yield f"rule-{label}", rules[:index] + rules[index + 1 :], rule
        for key in ("verbs", "resources", "apiGroups", "resourceNames"):
            values = rule.get(key) or []
            for value in values if len(values) > 1 else []:
                kept = {**rule, key: [v for v in values if v != value]}
                only = {**rule, key: [value]}
                yield f"{label}-{value}", rules[:index] + [kept] + rules[index + 1 :], only


REDUCTIONS = list(reductions(deployed()[1]["rules"]))


@pytest.mark.parametrize(
    "portal_rules, missing",
    [pytest.param(rules, missing, id=label) for label, rules, missing in REDUCTIONS],
    indirect=["portal_rules"],
)
def test_without_any_one_grant_the_portal_is_refused(
    missing, setup, demo_flavors, backend, django_capture_on_commit_callbacks
):
    if backend.name == "kubesim" and _only_on_real_server(missing):
        if missing.get("apiGroups") == [ADMISSION]:
            for _ in portal_life(setup, demo_flavors, backend, django_capture_on_commit_callbacks):
                pass
            assert refusals(backend) == []
            return
        # kubesim serves no resource.k8s.io: the claim template's apply is allowed
        # as a patch and answered 404, never authorized as a create. What is true
        # there: nothing is refused, and the portal did ask.
        for _ in portal_life(setup, demo_flavors, backend, django_capture_on_commit_callbacks):
            pass
        assert refusals(backend) == []
        asked = {(r["resource"], r["verb"], r["status"]) for r in backend.requests()}
        assert ("resourceclaimtemplates", "patch", 404) in asked
        return
    for _ in portal_life(setup, demo_flavors, backend, django_capture_on_commit_callbacks):
        if refusals(backend):
            break  # the rest of the life would only be refused more
    refused = [r["forbidden"] for r in refusals(backend)]
    assert refused, f"nothing refused without {missing}"
    assert any(
        rule_allows(missing, Attributes(resource_request=True, **attrs)) for attrs in refused
    ), refused


def granted():
    return {
        (group, resource, verb, name)
        for rule in deployed()[1]["rules"]
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
        if r["resource"] is None:
            continue  # discovery (is a group-version served?): every user may ask
        resource = r["resource"] + (f"/{r['subresource']}" if r.get("subresource") else "")
        key = (group_of(r["path"]), resource)
        needed.add((*key, r["verb"], None))
        if r["verb"] == "patch" and r["status"] == 201:
            needed.add((*key, "create", None))  # server-side apply creating it
    for binding in role_bindings:
        role = binding["roleRef"]
        needed.add(("rbac.authorization.k8s.io", "clusterroles", "bind", role["name"]))
    return needed


# Grants a cluster without DRA never exercises: kubesim answers 404 to the apply
# of a claim template, which on a real server creates it (authorized as create).
DRA_CREATE = ("resource.k8s.io", "resourceclaimtemplates", "create", None)


def _only_on_dra(rule):
    return rule.get("apiGroups") == ["resource.k8s.io"] and rule.get("verbs") == ["create"]


# Admission policies: kubesim serves none (its discovery answers 404), so the
# portal never asks it for them; the real server is where these grants are proved.
ADMISSION = "admissionregistration.k8s.io"


def _only_on_real_server(rule):
    return _only_on_dra(rule) or rule.get("apiGroups") == [ADMISSION]


def test_every_grant_of_the_role_is_used(
    setup, demo_flavors, backend, cluster, django_capture_on_commit_callbacks
):
    backend.clear_requests()
    role_bindings = []
    for name, _ in portal_life(setup, demo_flavors, backend, django_capture_on_commit_callbacks):
        if name == "batch job cancelled":  # the team's, read before the namespace goes
            role_bindings = cluster.list("RoleBinding", namespace="vision")
    portal = [r for r in backend.requests() if r.get("user") == backend.portal_user]
    expected = granted()
    if backend.name == "kubesim":
        expected = {g for g in expected if g != DRA_CREATE and g[0] != ADMISSION}
    assert used(portal, role_bindings) == expected


def test_granting_another_role_needs_the_deployed_role_to_say_so(
    setup, demo_flavors, backend, cluster, settings, django_capture_on_commit_callbacks
):
    """PORTAL_RBAC_CLUSTER_ROLE=admin with deploy/'s role as it is (bind on `edit`
    only): the apiserver refuses the RoleBinding, and the team shows why."""
    settings.PORTAL_RBAC_CLUSTER_ROLE = "admin"
    team = setup["team"]
    with django_capture_on_commit_callbacks(execute=True):
        quota_request = submit(team, demo_flavors["h100"], setup["alice"], gpus=1)
        quota_actions.approve(quota_request, by=setup["admin"])  # the sync runs inline

    sync = TeamSync.objects.get(team=team)
    assert (sync.status, sync.last_error_status) == (TeamSync.Status.FAILING, 403)
    assert sync.last_error.startswith(
        'rolebindings.rbac.authorization.k8s.io "gpu-portal-team" is forbidden: user '
        f'"{backend.portal_user}" (groups=["system:serviceaccounts" '
        '"system:serviceaccounts:portal" "system:authenticated"]) is attempting to grant RBAC '
        "permissions not currently held:\n"
    )
    assert cluster.get("RoleBinding", "gpu-portal-team", "vision") is None
    # Refused by the escalation check on the binding's write (bind on `admin`).
    assert {(r["resource"], r["name"], r["forbidden"]["verb"]) for r in refusals(backend)} == {
        ("rolebindings", "gpu-portal-team", "bind")
    }
