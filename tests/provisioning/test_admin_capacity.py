"""The Django admin's inventory page: a capacity override takes effect at once."""

from django.contrib.auth.models import Permission

from gpu_requests.models import Flavor
from provisioning.models import FlavorCapacity
from tests.factories import FlavorFactory


def test_an_override_set_in_the_admin_is_what_approvals_use(client, admin_user):
    flavor = FlavorFactory(slug="h100", capacity=16)
    inventory = FlavorCapacity.objects.create(flavor=flavor, devices=16)
    admin_user.user_permissions.add(Permission.objects.get(codename="change_flavorcapacity"))
    client.force_login(admin_user)

    response = client.post(
        f"/admin/provisioning/flavorcapacity/{inventory.pk}/change/", {"override": "12"}
    )

    assert response.status_code == 302
    assert Flavor.objects.get(pk=flavor.pk).capacity == 12
    client.post(f"/admin/provisioning/flavorcapacity/{inventory.pk}/change/", {"override": ""})
    assert Flavor.objects.get(pk=flavor.pk).capacity == 16  # the inventory's count again
