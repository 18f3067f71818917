"""Usage against quota and "How to use your namespace", through kubesim over HTTP.

The team is provisioned by the real sync, the inventory task reads the
namespace's ResourceQuota and FailedCreate events, and the example Job is the
text the team page shows, applied with kubectl.
"""

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from cluster import actions as cluster_actions
from cluster.inventory import node_serves_flavor
from gpu_requests import actions as quota_actions
from provisioning import actions
from tests.factories import submit
from tests.waiting import wait_for

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


@pytest.fixture
def vision_h100(vision, alice, demo_flavors, cluster, admin_user, monkeypatch):
    """Vision holds 2 H100, synced to kubesim (the sync runs here, no worker)."""
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)
    quota_request = submit(vision, demo_flavors["h100"], alice, gpus=2, starts_at=timezone.now())
    quota_actions.approve(quota_request, by=admin_user)
    actions.sync_team(vision.pk)
    return demo_flavors["h100"]


def example_of(client, team, flavor):
    page = client.get(f"/teams/{team.slug}/").content.decode()
    match = re.search(rf'<pre class="code" id="example-{flavor.slug}"[^>]*>(.*?)</pre>', page, re.S)
    assert match, "no example manifest for the flavor on the team page"
    return html.unescape(match.group(1))


def kubectl_apply(backend, namespace, manifest):
    """`kubectl apply` as a member of the team: a user in the team's group, which the
    RoleBinding the sync made grants `edit` in the namespace (and nothing else)."""
    kubeconfig = backend.user_kubeconfig(
        "alice", ["gpu-team-vision"], Path(f"{backend.kubeconfig}.alice")
    )
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig, "-n", namespace, "apply", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def wait_until_used(cluster, gpus):
    """The quota controller counts admitted pods a moment later, as on a cluster."""
    wait_for(
        lambda: (
            cluster.get("ResourceQuota", "gpu-quota", "vision")["status"]["used"].get(
                "requests.nvidia.com/gpu"
            )
            == gpus
        )
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_the_example_job_runs_on_a_node_of_its_flavor(
    client, alice, vision, vision_h100, cluster, backend
):
    client.force_login(alice)
    manifest = example_of(client, vision, vision_h100)
    kubectl_apply(backend, "vision", manifest)

    def scheduled():
        pods = cluster.list("Pod", namespace="vision", label_selector="job-name=gpu-check-h100")
        return [p for p in pods if p["spec"].get("nodeName")]

    (pod,) = wait_for(scheduled)
    node = cluster.get("Node", pod["spec"]["nodeName"])
    assert node_serves_flavor(node, vision_h100)
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_the_dashboard_shows_use_at_the_limit_and_refused_pods(
    client, alice, vision, vision_h100, cluster, backend
):
    client.force_login(alice)
    cluster_actions.record_inventory()
    page = client.get("/").content.decode()
    usage = page[page.index('id="usage-vision"') :]
    assert re.search(
        r"<code>nvidia.com/gpu</code></td>\s*<td class=\"num\">2</td>\s*<td class=\"num\">0</td>",
        usage,
    )
    assert "2 free" in usage
    assert "pods are being refused" not in page

    # Three pods of one GPU each against a quota of two: the third is refused.
    job = yaml.safe_load(example_of(client, vision, vision_h100))
    job["spec"].update(parallelism=3, completions=3)
    job["spec"]["template"]["metadata"] = {"annotations": {"kubesim.io/duration": "1h"}}
    kubectl_apply(backend, "vision", yaml.safe_dump(job))

    def refused():
        events = cluster.list("Event", namespace="vision", field_selector="reason=FailedCreate")
        return [e for e in events if "exceeded quota" in e["message"]]

    wait_for(refused)
    # The quota controller counts the two admitted pods a moment later, as on a cluster.
    wait_for(
        lambda: (
            cluster.get("ResourceQuota", "gpu-quota", "vision")["status"]["used"].get(
                "requests.nvidia.com/gpu"
            )
            == "2"
        )
    )
    cluster_actions.record_inventory()
    page = client.get("/").content.decode()
    usage = page[page.index('id="usage-vision"') :]
    assert re.search(
        r"<code>nvidia.com/gpu</code></td>\s*<td class=\"num\">2</td>\s*<td class=\"num\">2</td>",
        usage,
    )
    assert "At the limit: pods are being refused" in usage
    assert "exceeded quota: gpu-quota" in usage


def test_the_page_reads_what_the_inventory_recorded_not_the_cluster(
    client, alice, vision, vision_h100, cluster, backend
):
    """No API call per page view: the dashboard shows the last inventory."""
    client.force_login(alice)
    assert 'id="usage-vision"' not in client.get("/").content.decode()
    cluster_actions.record_inventory()
    backend.clear_requests()
    assert 'id="usage-vision"' in client.get("/").content.decode()
    assert backend.requests() == []


def test_the_panel_names_the_namespace_and_the_oidc_kubeconfig(
    client, alice, vision, vision_h100, settings
):
    settings.PORTAL_CLUSTER_API_URL = "https://api.gpu.example.org:6443"
    settings.PORTAL_CLUSTER_OIDC_ISSUER = "https://sso.example.org/realms/gpu"
    settings.PORTAL_CLUSTER_OIDC_CLIENT_ID = "kubernetes"
    client.force_login(alice)
    page = client.get(f"/teams/{vision.slug}/").content.decode()
    assert '<code id="namespace-name">vision</code>' in page
    match = re.search(r'<pre class="code" id="kubeconfig-vision"[^>]*>(.*?)</pre>', page, re.S)
    config = yaml.safe_load(html.unescape(match.group(1)))
    assert config["clusters"][0]["cluster"]["server"] == "https://api.gpu.example.org:6443"
    assert config["contexts"][0]["context"]["namespace"] == "vision"
    args = config["users"][0]["user"]["exec"]["args"]
    assert "--oidc-issuer-url=https://sso.example.org/realms/gpu" in args
    assert "--oidc-client-id=kubernetes" in args
    # Copy buttons are hidden until the script shows them; the text is there without it.
    assert 'data-copy="kubeconfig-vision" hidden' in page


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.kubesim_tls  # kubectl sends no credentials over plain HTTP
def test_the_cluster_page_separates_capacity_reserved_and_allocated(
    client, alice, admin_user, vision, vision_h100, cluster, backend
):
    client.force_login(alice)
    kubectl_apply(backend, "vision", example_of(client, vision, vision_h100))

    def scheduled():
        pods = cluster.list("Pod", namespace="vision", label_selector="job-name=gpu-check-h100")
        return [p for p in pods if p["spec"].get("nodeName")]

    wait_for(scheduled)
    wait_until_used(cluster, "1")
    cluster_actions.record_inventory()
    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    row = page[page.index('id="flavor-h100"') :].split("</tr>")[0]
    numbers = re.findall(r'<td class="num">(\d+)', row)
    # capacity, approvals use, reserved by quota now, unreserved, allocated, not allocated
    assert numbers == ["16", "16", "2", "14", "1", "15"]
    team = page[page.index('id="sync-vision"') :].split("</tr>")[0]
    assert "2 × H100" in team
    assert "<code>nvidia.com/gpu</code> 1 / 2" in team
