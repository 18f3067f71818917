"""DRA flavors on the real control plane (Kubernetes v1.37.2: its scheduler allocates
the claims, its quota admission counts them) and on kubesim, which answers as a
server without DRA does (404 for resource.k8s.io), where the portal says so.

The ResourceSlices are published here as NVIDIA's driver would, on the two
`cpu-*` KWOK nodes: a DRA node must not also list its GPUs as an extended
resource (docs/dra-findings.md), and the demo's GPU nodes do.
"""

import pytest
import yaml
from django.utils import timezone

from cluster import actions as cluster_actions
from cluster import kube
from cluster.inventory import DRA_UNAVAILABLE
from cluster.models import Flavor, FlavorCapacity, GpuNode, NamespaceQuota
from gpu_requests import actions as quota_actions
from provisioning import actions, views
from teams.models import AuditEvent
from tests.dra import objects
from tests.factories import submit
from tests.waiting import wait_for

REAL = pytest.mark.kubernetes_only("kubesim does not serve resource.k8s.io (docs/dra.md)")


@pytest.fixture(autouse=True)
def queued(monkeypatch):
    """Team syncs queued by a transition are run by the test itself (no worker)."""
    monkeypatch.setattr(actions, "enqueue", lambda team_ids: team_ids)


def dra_flavor(slug, device_class="gpu.nvidia.com", selector=""):
    flavor = Flavor(
        slug=slug,
        name=slug.upper(),
        gpu_model="NVIDIA H100 80GB HBM3",
        memory_gb=80,
        device_class=device_class,
        device_selector=selector,
        capacity=0,
        price_per_gpu_hour="4.0000",
    )
    flavor.full_clean()  # as the admin's form does: the resource name becomes the class's key
    flavor.save()
    return flavor


@pytest.fixture
def published(cluster):
    """NVIDIA's two DeviceClasses; two H100s on cpu-0, two L4s and two MIG 1g.10gb on cpu-1."""
    for obj in (
        objects.device_class("gpu.nvidia.com", objects.GPU_CLASS),
        objects.device_class("mig.nvidia.com", objects.MIG_CLASS),
        objects.resource_slice("cpu-0", objects.H100_DEVICES),
        objects.resource_slice("cpu-1", objects.L4_DEVICES + objects.MIG_DEVICES),
    ):
        cluster.apply(obj, field_manager="tests")


def namespace(cluster, name):
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, field_manager="tests"
    )


def pod_with_claim(name, namespace_name, claim_name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace_name},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def allocation(cluster, name, namespace_name):
    claim = cluster.get("ResourceClaim", name, namespace_name) or {}
    return (claim.get("status") or {}).get("allocation")


@REAL
def test_the_inventory_counts_devices_from_slices_and_allocations_from_claims(
    db, backend, cluster, published
):
    flavors = {
        "h100": dra_flavor("h100-dra", selector=objects.H100_ONLY),
        "big": dra_flavor("big-dra", selector=objects.AT_LEAST_40GI),
        "any": dra_flavor("any-gpu-dra"),
        "mig": dra_flavor("mig-dra", device_class="mig.nvidia.com"),
        "missing": dra_flavor("missing-dra", device_class="nope.example.com"),
    }
    namespace(cluster, "dra-test")
    cluster.apply(
        objects.claim("one-h100", "dra-test", selector=objects.H100_ONLY), field_manager="tests"
    )
    cluster.apply(pod_with_claim("train", "dra-test", "one-h100"), field_manager="tests")
    # The real scheduler allocates the claim from the published slice and binds the pod.
    wait_for(lambda: allocation(cluster, "one-h100", "dra-test"), timeout=60)
    (result,) = allocation(cluster, "one-h100", "dra-test")["devices"]["results"]
    assert (result["driver"], result["pool"]) == ("gpu.nvidia.com", "cpu-0")

    cluster_actions.record_inventory()

    figures = {
        row.flavor.slug: (row.devices, row.allocated, row.nodes, row.problem)
        for row in FlavorCapacity.objects.select_related("flavor")
    }
    assert figures == {
        "h100-dra": (2, 1, {"cpu-0": 2}, ""),
        "big-dra": (2, 1, {"cpu-0": 2}, ""),
        "any-gpu-dra": (4, 1, {"cpu-0": 2, "cpu-1": 2}, ""),
        "mig-dra": (2, 0, {"cpu-1": 2}, ""),
        "missing-dra": (0, 0, {}, "DeviceClass nope.example.com does not exist on the cluster."),
    }
    flavors["h100"].refresh_from_db()
    assert flavors["h100"].capacity == 2  # what approvals now check
    node = GpuNode.objects.get(name="cpu-0")
    assert (node.allocatable, node.allocated) == ({objects.QUOTA_KEY: 2}, {objects.QUOTA_KEY: 1})


@pytest.fixture
def dra_quota(vision, alice, admin_user, cluster, published, django_capture_on_commit_callbacks):
    """Vision holds one H100 by DRA, synced to the cluster."""
    flavor = dra_flavor("h100-dra", selector=objects.H100_ONLY)
    cluster_actions.record_inventory()  # the flavor's capacity: the two H100s published
    flavor.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        request = submit(vision, flavor, alice, gpus=1, starts_at=timezone.now())
        quota_actions.approve(request, by=admin_user)
    actions.sync_team(vision.pk)

    def counted():
        quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
        return objects.QUOTA_KEY in ((quota.get("status") or {}).get("hard") or {})

    # Quota admission refuses everything it caps until the quota controller has
    # written the quota's status.
    wait_for(counted, timeout=30)
    return flavor


@REAL
def test_the_quota_caps_the_device_class_and_the_api_server_enforces_it(vision, cluster, dra_quota):
    assert cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"] == {
        objects.QUOTA_KEY: "1"
    }
    cluster.apply(objects.claim("one", "vision"), field_manager="tests")
    with pytest.raises(kube.PermanentClusterError) as refused:
        cluster.apply(objects.claim("two", "vision"), field_manager="tests")
    key = objects.QUOTA_KEY
    assert refused.value.status == 403
    assert str(refused.value).endswith(
        # The server's own words: the resource is named with its group.
        f'resourceclaims.resource.k8s.io "two" is forbidden: exceeded quota: gpu-quota, '
        f"requested: {key}=1, used: {key}=1, limited: {key}=1"
    )


@REAL
def test_the_drift_check_restores_the_device_class_cap(vision, cluster, dra_quota):
    cluster.call(
        "PATCH",
        cluster.path("ResourceQuota", "gpu-quota", "vision"),
        body={"spec": {"hard": {objects.QUOTA_KEY: "64"}}},
        content_type="application/merge-patch+json",
    )
    assert actions.check_drift() == [vision.pk]
    actions.sync_team(vision.pk)
    hard = cluster.get("ResourceQuota", "gpu-quota", "vision")["spec"]["hard"]
    assert hard == {objects.QUOTA_KEY: "1"}
    repaired = AuditEvent.objects.get(action="drift_repaired")
    assert f"{objects.QUOTA_KEY}: 64 -> 1" in repaired.reason


@REAL
def test_the_teams_example_runs_on_a_matching_device_and_a_second_waits_for_quota(
    vision, cluster, dra_quota
):
    """The team page's example for a DRA flavor, applied as it is: the scheduler
    allocates an H100 for it. The same example again (renamed) is over the quota:
    its pod is admitted and waits, and the inventory shows the claim controller's
    refusal against the team's quota row."""
    _, context = views.namespace_panel(vision)
    ((flavor, text),) = context["examples"]
    assert flavor == dra_quota
    template, job = yaml.safe_load_all(text)
    assert template["kind"] == "ResourceClaimTemplate"
    for obj in (template, job):
        cluster.apply(obj, field_manager="tests")

    def claims():
        return cluster.list("ResourceClaim", namespace="vision")

    wait_for(lambda: any((c.get("status") or {}).get("allocation") for c in claims()), timeout=60)
    (claim,) = claims()
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == "cpu-0"  # an H100, as the flavor's selector asks

    job["metadata"]["name"] = "second"
    cluster.apply(job, field_manager="tests")

    def refused():
        cluster_actions.record_inventory()
        row = NamespaceQuota.objects.filter(team=vision, resource_name=objects.QUOTA_KEY).first()
        return row is not None and row.refusing

    wait_for(refused, timeout=60)
    row = NamespaceQuota.objects.get(team=vision, resource_name=objects.QUOTA_KEY)
    assert (row.hard, row.used) == (1, 1)
    assert f"exceeded quota: gpu-quota, requested: {objects.QUOTA_KEY}=1" in row.refused_message


@pytest.mark.kubesim_only("kubesim answers as a server without DRA does")
def test_on_a_cluster_without_dra_the_portal_says_so(db, backend, cluster, client, admin_user):
    with pytest.raises(kube.PermanentClusterError) as absent:
        cluster.list("DeviceClass")
    assert absent.value.status == 404
    flavor = dra_flavor("h100-dra", selector=objects.H100_ONLY)

    cluster_actions.record_inventory()

    row = FlavorCapacity.objects.get(flavor=flavor)
    assert (row.devices, row.allocated, row.problem) == (0, 0, DRA_UNAVAILABLE)
    client.force_login(admin_user)
    page = client.get("/cluster/").content.decode()
    assert "DRA is not available on this cluster" in page
    assert "DRA: DeviceClass</span> <code>gpu.nvidia.com</code>" in page


@REAL
def test_a_gpu_and_its_mig_devices_are_counted_once_and_the_scheduler_agrees(db, backend, cluster):
    """An A100 published as NVIDIA's driver publishes partitionable devices (a counter
    set; the whole GPU and seven 1g.10gb MIG devices drawing on it): free, it counts
    once, as the GPU; with a MIG device allocated by the real scheduler, it counts
    for the MIG flavor (seven), and the scheduler will not allocate the whole GPU."""
    for obj in (
        objects.device_class("gpu.nvidia.com", objects.GPU_CLASS),
        objects.device_class("mig.nvidia.com", objects.MIG_CLASS),
        *objects.partitionable_slices("cpu-1"),
    ):
        cluster.apply(obj, field_manager="tests")
    dra_flavor("a100-dra", selector='device.attributes["gpu.nvidia.com"].type == "gpu"')
    dra_flavor("mig-dra", device_class="mig.nvidia.com")

    def figures():
        cluster_actions.record_inventory()
        return {
            row.flavor.slug: (row.devices, row.allocated, row.nodes)
            for row in FlavorCapacity.objects.select_related("flavor")
        }

    assert figures() == {"a100-dra": (1, 0, {"cpu-1": 1}), "mig-dra": (0, 0, {})}

    namespace(cluster, "dra-test")
    cluster.apply(
        objects.claim("slice", "dra-test", device_class_name="mig.nvidia.com"),
        field_manager="tests",
    )
    cluster.apply(pod_with_claim("small", "dra-test", "slice"), field_manager="tests")
    wait_for(lambda: allocation(cluster, "slice", "dra-test"), timeout=60)
    assert figures() == {"a100-dra": (0, 0, {}), "mig-dra": (7, 1, {"cpu-1": 7})}

    # The whole GPU is now out of reach: its claim stays unallocated.
    cluster.apply(objects.claim("whole", "dra-test"), field_manager="tests")
    cluster.apply(pod_with_claim("big", "dra-test", "whole"), field_manager="tests")

    def unschedulable():
        pod = cluster.get("Pod", "big", "dra-test")
        return [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        ]

    (condition,) = wait_for(unschedulable, timeout=60)
    assert "cannot allocate all claims" in condition["message"]
    assert allocation(cluster, "whole", "dra-test") is None


@REAL
def test_pods_asking_for_an_extended_resource_a_device_class_maps_count_for_its_flavor(
    db, backend, cluster
):
    """DRAExtendedResource (GA, on by default in v1.37.2): a DeviceClass with
    `extendedResourceName` makes the scheduler serve a pod asking for that resource
    with a claim on the class's devices; the extended-resource flavor of that name
    counts those devices and the allocation."""
    mapped = objects.device_class("gpu.nvidia.com", objects.GPU_CLASS)
    mapped["spec"]["extendedResourceName"] = "nvidia.com/dra-gpu"
    for obj in (mapped, objects.resource_slice("cpu-0", objects.H100_DEVICES)):
        cluster.apply(obj, field_manager="tests")
    dra_flavor("h100-dra", selector=objects.H100_ONLY)  # the portal reads DRA
    extended = Flavor(
        slug="h100-mapped",
        name="H100 (nvidia.com/dra-gpu)",
        gpu_model="NVIDIA H100 80GB HBM3",
        memory_gb=80,
        resource_name="nvidia.com/dra-gpu",
        capacity=0,
        price_per_gpu_hour="4.0000",
    )
    extended.full_clean()
    extended.save()
    namespace(cluster, "dra-test")
    pod = pod_with_claim("asks", "dra-test", "unused")
    del pod["spec"]["resourceClaims"]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/dra-gpu": "1"}}
    cluster.apply(pod, field_manager="tests")

    def claims():
        return [
            c
            for c in cluster.list("ResourceClaim", namespace="dra-test")
            if ((c.get("status") or {}).get("allocation"))
        ]

    (claim,) = wait_for(claims, timeout=60)  # made by the scheduler
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == "cpu-0"

    cluster_actions.record_inventory()
    row = FlavorCapacity.objects.get(flavor=extended)
    assert (row.devices, row.allocated, row.nodes) == (2, 1, {"cpu-0": 2})
    extended.refresh_from_db()
    assert extended.capacity == 2
