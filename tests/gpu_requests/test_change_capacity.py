"""Lowering a flavor's capacity below what is already approved is refused,
saying what would be over-committed; a change is audited; only platform
admins change capacity, in the catalog or as the inventory's override."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

from cluster import capacity
from cluster.models import CapacityAction, Flavor, FlavorCapacity
from gpu_requests import actions
from teams import errors
from teams.models import AuditEvent
from tests.factories import UserFactory, next_week, submit


@pytest.fixture
def approved(vision, alice, admin_user, h100):
    """10 of h100's 16 GPUs approved next week, 4 more in the week after."""
    first = submit(vision, h100, alice, gpus=10, starts_at=next_week(), hours=48)
    second = submit(vision, h100, alice, gpus=4, starts_at=next_week(days=14), hours=24)
    for quota_request in (first, second):
        actions.approve(quota_request, by=admin_user)
    return first


def capacity_events():
    return AuditEvent.objects.filter(action=CapacityAction.CHANGE_CAPACITY)


def test_it_refuses_to_go_below_what_is_approved_and_says_where(approved, admin_user, h100):
    with pytest.raises(capacity.OverCommitted) as refused:
        capacity.change_capacity(h100, 8, by=admin_user)
    message = str(refused.value)
    assert "cannot go down to 8 GPUs: up to 10 are already reserved" in message
    assert f"{approved.starts_at:%Y-%m-%d %H:%M} UTC" in message
    assert Flavor.objects.get(pk=h100.pk).capacity == 16
    assert not capacity_events().exists()


def test_it_lowers_to_exactly_the_peak_and_audits(approved, admin_user, h100):
    capacity.change_capacity(h100, 10, by=admin_user, reason="two nodes drained")
    assert Flavor.objects.get(pk=h100.pk).capacity == 10
    [event] = capacity_events()
    assert event.team is None
    assert event.actor == admin_user
    assert event.subject == h100
    assert event.subject_type == ContentType.objects.get_for_model(Flavor)
    assert event.reason == "H100 80GB: 16 -> 10 GPUs. two nodes drained"


def test_reservations_in_the_past_do_not_count(vision, alice, admin_user, h100, time_machine):
    past = submit(vision, h100, alice, gpus=16, starts_at=next_week(), hours=2)
    actions.approve(past, by=admin_user)
    time_machine.move_to(past.ends_at + timedelta(minutes=1))
    capacity.change_capacity(h100, 2, by=admin_user)
    assert Flavor.objects.get(pk=h100.pk).capacity == 2


def test_only_platform_admins_change_capacity(h100, carol):
    with pytest.raises(errors.NotAllowed):
        capacity.change_capacity(h100, 32, by=carol)


def test_the_catalog_admin_form_names_the_over_commitment(client, approved, admin_user, h100):
    admin_user.user_permissions.add(Permission.objects.get(codename="change_flavor"))
    client.force_login(admin_user)
    url = f"/admin/cluster/flavor/{h100.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form.initial.get(name, "") for name in form.fields}
    data |= {"capacity": "3", "node_selector": '{"a": "b"}', "tolerations": "[]"}
    data |= {"is_active": "on"} if h100.is_active else {}
    response = client.post(url, data)
    assert response.status_code == 200  # the form again, with the error
    assert "cannot go down to 3 GPUs: up to 10 are already reserved" in response.content.decode()
    assert Flavor.objects.get(pk=h100.pk).capacity == 16
    data["capacity"] = "12"
    assert client.post(url, data).status_code == 302
    assert Flavor.objects.get(pk=h100.pk).capacity == 12
    assert capacity_events().count() == 1


def test_staff_without_review_permission_see_capacity_read_only(client, h100):
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="change_flavor"))
    client.force_login(staff)
    page = client.get(f"/admin/cluster/flavor/{h100.pk}/change/").content.decode()
    assert 'name="capacity"' not in page


def test_an_override_below_the_approved_is_refused_in_the_admin(client, approved, admin_user, h100):
    inventory = FlavorCapacity.objects.create(flavor=h100, devices=16)
    admin_user.user_permissions.add(Permission.objects.get(codename="change_flavorcapacity"))
    client.force_login(admin_user)
    url = f"/admin/cluster/flavorcapacity/{inventory.pk}/change/"
    response = client.post(url, {"override": "5"})
    assert response.status_code == 200
    assert "cannot go down to 5 GPUs" in response.content.decode()
    assert Flavor.objects.get(pk=h100.pk).capacity == 16
    assert FlavorCapacity.objects.get().override is None
