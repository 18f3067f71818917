# ruff: noqa: F811 - the namespace tests' fixture, imported, is a parameter here
"""A spent hard budget holds what a team starts with kubectl in its namespace, on
kubesim and on the real control plane: a member's own `kubectl create` of a GPU pod
is refused by the ResourceQuota the budget adds (its name says why), the team page
says why, and a platform admin raising the budget deletes that quota, so the same
pod is admitted. The portal's side of it (the running total, the rule, the notice)
is tests/billing/test_budget_binds.py."""

import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from billing import actions as billing_actions
from billing.models import Budget
from provisioning import actions, manifests
from tests.billing.ledger import meter
from tests.provisioning.test_namespace_usage import KUBECTL, vision_h100  # noqa: F401
from tests.waiting import wait_for


def gpu_pod(flavor, name):
    """A pod asking for one GPU of `flavor`, as a member would write it (the example
    Job's pod, which the namespace's restricted Pod Security admits)."""
    job = manifests.example_job(
        namespace="vision",
        flavor_slug=flavor.slug,
        resource_name=flavor.resource_name,
        node_selector=flavor.node_selector,
        tolerations=flavor.tolerations,
    )
    spec = job["spec"]["template"]["spec"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def kubectl_create(backend, manifest):
    """`kubectl create` as alice, a member of vision: her own credentials, which the
    team's RoleBinding lets edit the namespace and nothing else."""
    kubeconfig = backend.user_kubeconfig(
        "alice", ["gpu-team-vision"], Path(f"{backend.kubeconfig}.alice")
    )
    return subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig, "-n", "vision", "create", "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_a_spent_budget_holds_what_members_start_with_kubectl(
    client,
    alice,
    admin_user,
    vision,
    vision_h100,
    cluster,
    backend,
):
    # Vision holds 2 H100 (synced); its pods held 3 GPU-hours this hour, past 1.00.
    hour = billing_actions.hour_floor(timezone.now())
    meter(hour, teams={(vision, vision_h100): (3 * 3600, 3 * 3600, 0, 0)})
    billing_actions.set_budget(vision, Decimal(1), by=admin_user, mode="hard")
    assert Budget.objects.get(team=vision).spent_at is not None
    actions.sync_team(vision.pk)

    budget_quota = cluster.get("ResourceQuota", manifests.BUDGET_QUOTA_NAME, "vision")
    # Every GPU resource of the catalog at what the team runs through the portal: none.
    assert set(budget_quota["spec"]["hard"].values()) == {"0"}
    gpu_quota = cluster.get("ResourceQuota", manifests.QUOTA_NAME, "vision")
    assert gpu_quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"  # as approved
    # The quota controller counts what the namespace holds a moment later.
    wait_for(
        lambda: (
            "requests.nvidia.com/gpu"
            in (
                (cluster.get("ResourceQuota", manifests.BUDGET_QUOTA_NAME, "vision") or {}).get(
                    "status"
                )
                or {}
            ).get("used", {})
        )
    )

    refused = kubectl_create(backend, gpu_pod(vision_h100, "notebook"))
    assert refused.returncode != 0
    assert "exceeded quota: gpu-budget-spent" in refused.stderr, refused.stderr
    assert "limited: requests.nvidia.com/gpu=0" in refused.stderr

    client.force_login(alice)
    page = client.get("/teams/vision/").content.decode()
    held = page[page.index('id="budget-held"') :].split("</section>")[0]
    assert "GPU work held: the hard budget is spent" in held
    assert "exceeded quota: gpu-budget-spent" in held

    # A platform admin raises the budget: the hold lifts, the budget's quota goes.
    billing_actions.set_budget(vision, Decimal(1000), by=admin_user, mode="hard")
    actions.sync_team(vision.pk)
    assert cluster.get("ResourceQuota", manifests.BUDGET_QUOTA_NAME, "vision") is None
    admitted = kubectl_create(backend, gpu_pod(vision_h100, "notebook"))
    assert admitted.returncode == 0, admitted.stderr
    assert 'id="budget-held"' not in client.get("/teams/vision/").content.decode()
