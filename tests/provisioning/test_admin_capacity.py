"""The Django admin's inventory page: a capacity override takes effect at once."""

from django.contrib.auth.models import Permission
from django.utils import timezone

from cluster.models import Flavor, FlavorCapacity
from tests.factories import FlavorFactory, UserFactory


def test_an_override_set_in_the_admin_is_what_approvals_use(client, admin_user):
    flavor = FlavorFactory(slug="h100", capacity=16)
    inventory = FlavorCapacity.objects.create(flavor=flavor, devices=16)
    admin_user.user_permissions.add(Permission.objects.get(codename="change_flavorcapacity"))
    client.force_login(admin_user)

    response = client.post(
        f"/admin/cluster/flavorcapacity/{inventory.pk}/change/", {"override": "12"}
    )

    assert response.status_code == 302
    assert Flavor.objects.get(pk=flavor.pk).capacity == 12
    client.post(f"/admin/cluster/flavorcapacity/{inventory.pk}/change/", {"override": ""})
    assert Flavor.objects.get(pk=flavor.pk).capacity == 16  # the inventory's count again


def test_staff_without_the_review_permission_cannot_override(client, db):
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="change_flavorcapacity"))
    inventory = FlavorCapacity.objects.create(flavor=FlavorFactory(slug="h100"), devices=16)
    client.force_login(staff)
    url = f"/admin/cluster/flavorcapacity/{inventory.pk}/change/"
    assert client.post(url, {"override": "1"}).status_code == 403
    assert FlavorCapacity.objects.get().override is None


def test_a_counted_flavors_capacity_is_read_only_in_the_catalog(client, admin_user):
    flavor = FlavorFactory(slug="h100", capacity=16)
    FlavorCapacity.objects.create(flavor=flavor, devices=16, observed_at=timezone.now())
    admin_user.user_permissions.add(Permission.objects.get(codename="change_flavor"))
    client.force_login(admin_user)
    page = client.get(f"/admin/cluster/flavor/{flavor.pk}/change/").content.decode()
    assert 'name="capacity"' not in page
