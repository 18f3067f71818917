"""Quota per GPU flavor, enforced by the API server for every client of a team's
namespace: a member's own kubectl cannot spend a T4 approval on H100 nodes.

The team is provisioned by the real sync; the pods, Jobs and Deployments are
created with kubectl as alice, a member (the `gpu-team-vision` group the
team's RoleBinding grants `edit`), never as the cluster's admin. kubesim
serves no admission policies: there the portal says so (docs/kubesim.md's
table, row `admission-policies`).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from cluster import kube
from gpu_requests import actions as quota_actions
from provisioning import actions, manifests, policies
from provisioning.models import TeamSync
from tests.factories import submit
from tests.waiting import wait_for

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
REAL_SERVER_ONLY = pytest.mark.kubernetes_only(
    "kubesim serves no admission policies (docs/kubesim.md, row admission-policies)"
)
pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed"),
    pytest.mark.kubesim_tls,  # kubectl sends no credentials over plain HTTP
]


@pytest.fixture
def vision_t4(vision, alice, demo_flavors, backend, cluster, admin_user, monkeypatch):
    """Vision holds 2 T4 (which shares `nvidia.com/gpu` with H100, A100 and L4),
    synced here (no worker)."""
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)
    t4 = submit(vision, demo_flavors["t4"], alice, gpus=2, starts_at=timezone.now())
    quota_actions.approve(t4, by=admin_user)
    actions.sync_team(vision.pk)
    if backend.name == "kubernetes":
        in_force(cluster, demo_flavors["h100"], held=0)
        pinned(cluster, demo_flavors["t4"])
    return t4


def in_force(cluster, flavor, *, held):
    """Wait until the API server enforces what the sync just wrote: its policies and
    bindings, and the quota they read, reach its admission caches a moment after
    they are stored (as on any cluster). Asked with a dry run, which admission sees
    and nothing stores."""
    probe = pod("probe", gpus=held + 1, selector=product(flavor))

    def refused_as_wanted():
        try:
            cluster.call(
                "POST", "/api/v1/namespaces/vision/pods", query={"dryRun": "All"}, body=probe
            )
        except kube.PermanentClusterError as exc:
            return f"holds {held} of {flavor.name} now" in exc.message
        return False

    wait_for(refused_as_wanted, timeout=30)


def pinned(cluster, flavor):
    """Wait until the mutating policy, which reaches the API server's admission
    caches apart from the validating one, pins a pod naming no flavor to `flavor`
    (to none: `flavor=None`; the validating policy then refuses the pod)."""
    wanted = product(flavor) if flavor else None

    def pins():
        try:
            created = cluster.call(
                "POST", "/api/v1/namespaces/vision/pods", query={"dryRun": "All"}, body=pod("probe")
            )
        except kube.PermanentClusterError:
            return wanted is None
        return created["spec"].get("nodeSelector") == wanted

    wait_for(pins, timeout=30)


def pod(name, *, gpus=1, resource="nvidia.com/gpu", selector=None, affinity=None):
    spec = manifests.example_job(
        namespace="vision",
        flavor_slug="x",
        resource_name=resource,
        node_selector=selector or {},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        gpus=gpus,
    )["spec"]["template"]["spec"]
    spec["restartPolicy"] = "Always"
    if not selector:
        del spec["nodeSelector"]
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def product(flavor):
    return {"nvidia.com/gpu.product": flavor.node_selector["nvidia.com/gpu.product"]}


def required_affinity(flavor):
    ((key, value),) = flavor.node_selector.items()
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def as_member(backend, *args, manifest=None):
    """kubectl as alice, a member of vision: (exit code, stdout, stderr)."""
    kubeconfig = backend.user_kubeconfig(
        "alice", ["gpu-team-vision"], Path(f"{backend.kubeconfig}.alice")
    )
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig, "-n", "vision", *args],
        input=json.dumps(manifest) if manifest is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout, result.stderr


def create(backend, obj):
    return as_member(backend, "create", "-o", "json", "-f", "-", manifest=obj)


@REAL_SERVER_ONLY
def test_a_t4_approval_cannot_be_spent_on_h100_nodes(vision_t4, demo_flavors, backend, settings):
    code, _, refusal = create(backend, pod("on-h100", selector=product(demo_flavors["h100"])))
    assert code != 0
    assert "forbidden" in refusal
    assert "1 x H100 (nvidia.com/gpu); team vision holds 0 of H100 now" in refusal
    assert f"{settings.PORTAL_BASE_URL}/requests/new/?flavor=h100" in refusal

    code, out, err = create(backend, pod("on-t4", selector=product(demo_flavors["t4"])))
    assert code == 0, err
    assert json.loads(out)["spec"]["nodeSelector"] == product(demo_flavors["t4"])


@REAL_SERVER_ONLY
def test_a_pod_never_asks_for_more_of_a_flavor_than_the_team_holds(
    vision_t4, demo_flavors, backend
):
    code, _, refusal = create(backend, pod("three", gpus=3, selector=product(demo_flavors["t4"])))
    assert code != 0
    assert "3 x T4 (nvidia.com/gpu); team vision holds 2 of T4 now" in refusal


@REAL_SERVER_ONLY
def test_required_node_affinity_counts_as_placement(vision_t4, demo_flavors, backend):
    on_t4 = pod("affine-t4", affinity=required_affinity(demo_flavors["t4"]))
    code, _, err = create(backend, on_t4)
    assert code == 0, err
    on_h100 = pod("affine-h100", affinity=required_affinity(demo_flavors["h100"]))
    code, _, refusal = create(backend, on_h100)
    assert code != 0
    assert "team vision holds 0 of H100 now" in refusal


@REAL_SERVER_ONLY
def test_pod_templates_are_refused_before_their_pods(vision_t4, demo_flavors, backend):
    """A Job's or Deployment's template on H100 is refused when it is created, with
    the same message, rather than its pods failing quietly in its controller."""
    template = pod("web", selector=product(demo_flavors["h100"]))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }
    code, _, refusal = create(backend, deployment)
    assert code != 0
    assert "team vision holds 0 of H100 now" in refusal

    job = manifests.example_job(
        namespace="vision",
        flavor_slug="h100",
        resource_name="nvidia.com/gpu",
        node_selector=demo_flavors["h100"].node_selector,
        tolerations=demo_flavors["h100"].tolerations,
    )
    del job["metadata"]["namespace"]
    code, _, refusal = create(backend, job)
    assert code != 0
    assert "team vision holds 0 of H100 now" in refusal


@REAL_SERVER_ONLY
def test_a_pod_naming_no_flavor_is_pinned_to_the_one_the_team_holds(
    vision_t4, demo_flavors, backend, cluster, admin_user, alice
):
    code, out, err = create(backend, pod("anywhere"))
    assert code == 0, err
    assert json.loads(out)["spec"]["nodeSelector"] == product(demo_flavors["t4"])

    # Holding two flavors of the resource, the pod must say which.
    h100 = submit(vision_t4.team, demo_flavors["h100"], alice, gpus=1, starts_at=timezone.now())
    quota_actions.approve(h100, by=admin_user)
    actions.sync_team(vision_t4.team.pk)
    in_force(cluster, demo_flavors["h100"], held=1)
    pinned(cluster, None)
    code, _, refusal = create(backend, pod("ambiguous"))
    assert code != 0
    assert "without choosing a GPU flavor" in refusal
    assert "H100 (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3): your team holds 1" in refusal
    assert "T4 (nvidia.com/gpu.product=Tesla-T4): your team holds 2" in refusal


@REAL_SERVER_ONLY
def test_the_holdings_move_with_the_quota(
    vision_t4, demo_flavors, backend, cluster, admin_user, alice
):
    """Approved, the H100 pod is admitted; revoked, refused again: the parameters
    (the namespace's holdings) follow each start and end of quota."""
    h100 = submit(vision_t4.team, demo_flavors["h100"], alice, gpus=1, starts_at=timezone.now())
    quota_actions.approve(h100, by=admin_user)
    actions.sync_team(vision_t4.team.pk)
    in_force(cluster, demo_flavors["h100"], held=1)
    code, _, err = create(backend, pod("now-h100", selector=product(demo_flavors["h100"])))
    assert code == 0, err

    quota_actions.revoke(h100, by=admin_user, reason="over")
    actions.sync_team(vision_t4.team.pk)
    in_force(cluster, demo_flavors["h100"], held=0)
    code, _, refusal = create(backend, pod("again-h100", selector=product(demo_flavors["h100"])))
    assert code != 0
    assert "team vision holds 0 of H100 now" in refusal


@REAL_SERVER_ONLY
def test_a_member_cannot_raise_the_holdings(vision_t4, backend):
    """The parameters are the quota's annotations, which `edit` cannot write."""
    code, _, err = as_member(
        backend,
        "annotate",
        "--overwrite",
        "resourcequota",
        "gpu-quota",
        "gpu-portal.io/gpus.h100=8",
    )
    assert code != 0
    assert "forbidden" in err


@REAL_SERVER_ONLY
def test_the_drift_check_restores_the_policies_and_their_parameters(
    vision_t4, demo_flavors, backend, cluster
):
    binding = f"{policies.VALIDATING_NAME}.vision"
    cluster.delete("ValidatingAdmissionPolicyBinding", binding)
    cluster.call(
        "PATCH",
        "/api/v1/namespaces/vision/resourcequotas/gpu-quota",
        body={"metadata": {"annotations": {"gpu-portal.io/gpus.h100": "8"}}},
        content_type="application/merge-patch+json",
    )
    assert actions.check_drift() == [vision_t4.team_id]
    actions.sync_team(vision_t4.team_id)
    assert cluster.get("ValidatingAdmissionPolicyBinding", binding) is not None
    live = cluster.get("ResourceQuota", "gpu-quota", "vision")["metadata"]["annotations"]
    assert live["gpu-portal.io/gpus.h100"] == "0"
    assert live["gpu-portal.io/gpus.t4"] == "2"
    assert actions.check_drift() == []


def test_the_cluster_page_says_which_rules_are_in_force(
    vision_t4, demo_flavors, backend, client, admin_user
):
    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    cell = page[page.index('id="flavor-rule-vision"') :].split("</td>", 1)[0]
    sync = TeamSync.objects.get(team=vision_t4.team)
    if backend.name == "kubernetes":
        assert sync.flavor_rules == "pinned"
        assert "Enforced by the API server" in cell
    else:
        # kubesim: the policies are not applied, and the page does not pretend.
        assert not any(key.startswith(("Validating", "Mutating")) for key in sync.applied)
        assert "Not enforced on this cluster" in cell
        code, _, err = create(backend, pod("unchecked", selector=product(demo_flavors["h100"])))
        assert code == 0, err
