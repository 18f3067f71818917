"""Several clusters (issue 29), first part: each is reached through its own
kubeconfig, has its own inventory and state, and one that stops answering holds up
none of the others. Two kubesim instances, each with the same node names."""

import pytest
from django.urls import reverse

from cluster import actions, kube
from cluster.models import Cluster, Flavor, GpuNode
from kubesim.testing import SMALL_CLUSTER, running_kubesim
from tests.factories import FlavorFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters():
    kube.reset()
    Cluster.objects.filter(slug=Cluster.DEFAULT).delete()  # none of its flavors here
    with running_kubesim(SMALL_CLUSTER) as onprem_sim, running_kubesim(SMALL_CLUSTER) as cloud_sim:
        onprem = Cluster.objects.create(
            name="On-premises", slug="onprem", region="eu-west",
            kubeconfig=onprem_sim.kubeconfig_path,
        )  # fmt: skip
        cloud = Cluster.objects.create(
            name="Cloud", slug="cloud", region="us-east", kubeconfig=cloud_sim.kubeconfig_path
        )
        yield onprem, cloud, cloud_sim
    kube.reset()


def product_of(entry, node):
    return kube.cluster(entry).get("Node", node)["metadata"]["labels"]["nvidia.com/gpu.product"]


def test_each_cluster_is_inventoried_through_its_own_connection(two_clusters):
    onprem, cloud, _ = two_clusters
    h100 = FlavorFactory(
        slug="onprem-h100", cluster=onprem,
        node_selector={"nvidia.com/gpu.product": product_of(onprem, "gpu-h100-0")},
    )  # fmt: skip
    l4 = FlavorFactory(
        slug="cloud-l4", cluster=cloud,
        node_selector={"nvidia.com/gpu.product": product_of(cloud, "gpu-l4-0")},
    )  # fmt: skip

    assert actions.record_inventories() == 2

    # The same node names on both, each row its cluster's.
    names = {c.slug: set(c.nodes.values_list("name", flat=True)) for c in (onprem, cloud)}
    assert names["onprem"] == names["cloud"] and "gpu-h100-0" in names["onprem"]
    # A flavor counts the devices of its own cluster only.
    for flavor in (h100, l4):
        assert Flavor.objects.get(pk=flavor.pk).capacity == 2
    for entry in (onprem, cloud):
        entry.refresh_from_db()
        assert (entry.state, entry.problem) == ("reachable", "")
        assert entry.version.startswith("v1.") and entry.inventory_at is not None
        assert entry.serves_dra is False and entry.serves_admission_policies is False


def test_a_cluster_that_stops_answering_holds_up_none_of_the_others(
    two_clusters, client, admin_user
):
    onprem, cloud, cloud_sim = two_clusters
    actions.record_inventories()
    first = Cluster.objects.get(pk=cloud.pk).inventory_at
    cloud_sim.stop()

    assert actions.record_inventories() == 1

    onprem.refresh_from_db()
    cloud.refresh_from_db()
    assert onprem.state == "reachable" and onprem.inventory_at > first
    assert cloud.state == "unreachable" and cloud.inventory_at == first
    assert cloud.checked_at > first and cloud.problem
    # Its last figures stay until it answers again.
    assert GpuNode.objects.filter(cluster=cloud).count() == 3  # its GPU nodes
    # The cluster page says which is behind, since when and why.
    client.force_login(admin_user)
    page = client.get(reverse("cluster_overview")).content.decode()
    row = page.split('id="cluster-cloud"')[1].split("</tr>")[0]
    assert "not answering" in row and "behind since" in row and "Connection refused" in row
    row = page.split('id="cluster-onprem"')[1].split("</tr>")[0]
    assert "reachable" in row and "v1." in row and "DRA: no" in row


def test_members_see_where_clusters_are_and_how_they_are_admins_what_reaches_them(
    two_clusters, client, alice, admin_user
):
    onprem, _, _ = two_clusters
    actions.record_inventories()
    client.force_login(alice)
    listed = client.get(reverse("cluster-list")).json()["results"]
    assert [c["slug"] for c in listed] == ["cloud", "onprem"]
    assert set(listed[1]) == {
        "slug", "name", "region", "state", "checked_at", "inventory_at", "version",
        "serves_dra", "serves_admission_policies", "problem",
    }  # fmt: skip
    assert listed[1]["state"] == "reachable"
    refused = client.post(reverse("cluster-list"), {"name": "Edge", "slug": "edge"})
    assert refused.status_code == 403

    client.force_login(admin_user)
    made = client.post(
        reverse("cluster-list"),
        {"name": "Edge", "slug": "edge", "kubeconfig": "/etc/portal/edge/kubeconfig"},
        content_type="application/json",
    )
    assert made.status_code == 201, made.json()
    assert made.json()["kubeconfig"] == "/etc/portal/edge/kubeconfig"
    for body, fields in (
        ({"name": "Edge\x00", "slug": "edge2"}, {"name"}),
        ({"name": 0, "slug": "zero", "region": None}, {"name", "region"}),
        ({"name": "Edge", "slug": "Not a slug", "prometheus_url": "ftp://x"}, {"slug", "name",
         "prometheus_url"}),  # the name is taken
        ({"name": "Far", "slug": "far", "kubeconfig": "/etc/a\nb", "region": "x" * 101},
         {"kubeconfig", "region"}),
    ):  # fmt: skip
        bad = client.post(reverse("cluster-list"), body, content_type="application/json")
        assert bad.status_code == 400 and set(bad.json()) == fields, bad.json()
    # A cluster its flavors belong to is not deleted from under them.
    FlavorFactory(slug="onprem-h100", cluster=onprem)
    kept = client.delete(reverse("cluster-detail", args=["onprem"]))
    assert kept.status_code == 409 and "onprem-h100" in kept.json()["detail"]
    assert client.delete(reverse("cluster-detail", args=["edge"])).status_code == 204


def test_the_request_form_offers_each_clusters_flavors_under_its_name(client, alice, h100):
    """A member picks the cheaper or the freer cluster: the flavors are grouped by
    cluster in the choice and in the table of offers, with price and what is free."""
    cloud = Cluster.objects.create(name="Cloud", slug="cloud", region="us-east", reachable=False)
    FlavorFactory(slug="cloud-h100", name="H100 80GB · cloud", cluster=cloud, capacity=8,
                  price_per_gpu_hour="6.5")  # fmt: skip
    client.force_login(alice)
    page = client.get(reverse("request_new")).content.decode()
    choice = page.split('id="id_flavor"')[1].split("</select>")[0]
    assert '<optgroup label="Cloud (us-east)">' in choice
    assert '<optgroup label="default">' in choice
    assert choice.index("Cloud (us-east)") < choice.index("H100 80GB · cloud")
    offers = page.split('id="flavor-matches"')[1]
    assert offers.count('<tr class="group">') == 2
    cloud_row = offers.split("Cloud (us-east)")[1]
    assert "not answering" in cloud_row.split("</th>")[0]
    assert "6.50" in cloud_row.split('id="match-cloud-h100"')[1].split("</tr>")[0]

    Flavor.objects.filter(cluster=cloud).delete()
    one = client.get(reverse("request_new")).content.decode()
    assert "<optgroup" not in one and '<tr class="group">' not in one  # one cluster: as before


def test_the_default_cluster_is_reached_through_the_settings(client, admin_user, h100):
    """`default` (today's installation) keeps its slug and is reached through
    PORTAL_KUBECONFIG and friends, not through a kubeconfig of its own."""
    client.force_login(admin_user)
    url = reverse("cluster-detail", args=["default"])
    for body, field in (({"kubeconfig": "/etc/x"}, "kubeconfig"), ({"slug": "onprem"}, "slug")):
        refused = client.patch(url, body, content_type="application/json")
        assert refused.status_code == 400 and field in refused.json(), refused.json()
    renamed = client.patch(url, {"name": "On-premises", "region": "eu-west"},
                           content_type="application/json")  # fmt: skip
    assert renamed.status_code == 200 and renamed.json()["name"] == "On-premises"
    assert Flavor.objects.get(pk=h100.pk).cluster.slug == "default"


def test_another_clusters_quota_is_never_written_into_the_default_clusters_namespace(
    vision, alice, h100
):
    """Provisioning writes the default cluster's quota only (docs/clusters.md): an
    approval of GPUs on another cluster must not open the same resource name here."""
    from gpu_requests.models import QuotaRequest
    from provisioning.desired import desired_state
    from tests.factories import submit

    cloud = Cluster.objects.create(name="Cloud", slug="cloud")
    cloud_h100 = FlavorFactory(slug="cloud-h100", cluster=cloud)  # the same resource name
    for flavor, gpus in ((h100, 2), (cloud_h100, 6)):
        asked = submit(vision, flavor, alice, gpus=gpus)
        QuotaRequest.objects.filter(pk=asked.pk).update(status=QuotaRequest.Status.ACTIVE)
    state = desired_state(vision.pk)
    (quota,) = [o for o in state.objects() if o["metadata"]["name"] == "gpu-quota"]
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"
    assert state.served == {"h100"} and state.held_by_flavor == {"h100": 2}


def test_flavors_share_a_quota_key_only_within_their_cluster(client, admin_user, h100, a100):
    cloud = Cluster.objects.create(name="Cloud", slug="cloud")
    l4, t4 = (FlavorFactory(slug=s, cluster=cloud) for s in ("cloud-l4", "cloud-t4"))
    lone = FlavorFactory(slug="cloud-h200", cluster=cloud, resource_name="example.com/h200")
    assert h100.shares_resource_with() == [a100]  # not the cloud's nvidia.com/gpu flavors
    assert l4.shares_resource_with() == [t4] and lone.shares_resource_with() == []
    client.force_login(admin_user)
    notes = [
        n.split("</p>")[0]
        for n in client.get(reverse("cluster_overview"))
        .content.decode()
        .split('<p class="note">')[1:]
    ]
    assert len(notes) == 2
    assert {"A100 80GB, H100 80GB", "CLOUD-L4, CLOUD-T4"} == {n.split(" share")[0] for n in notes}
