"""batch-windows/: admins write, everyone reads; rule and capacity errors as 400s."""

from datetime import timedelta

import pytest

from batch.models import BatchWindow
from cluster import actions as cluster_actions
from tests.api.conftest import client_for
from tests.factories import FlavorFactory, submit

URL = "/api/v1/batch-windows/"


def window_data(**overrides):
    data = {
        "name": "Weekend",
        "timezone": "America/New_York",
        "days": ["fri"],
        "start_time": "20:00",
        "end_time": "06:00",
        "end_day": "mon",
        "exceptions": ["2026-12-25"],
        "capacity": {"h100": 8},
        "price_factor": "0.5",
        "spot_allowed": True,
        "enabled": True,
    }
    return {**data, **overrides}


def test_an_admin_creates_a_weekend_window(admin_user, h100):
    response = client_for(admin_user).post(URL, window_data(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["capacity"] == {"h100": 8}
    assert body["summary"] == "Fri 20:00-Mon 06:00 America/New_York"
    found = client_for(admin_user).get(
        f"{URL}{body['id']}/occurrences/",
        {"from": "2026-06-01T00:00:00Z", "to": "2026-06-15T00:00:00Z"},
    )
    assert found.status_code == 200
    # The weekend of 29 May is still open on Monday 1 June until 06:00 local.
    assert [o["opens_at"] for o in found.json()] == [
        "2026-05-30T00:00:00Z",
        "2026-06-06T00:00:00Z",
        "2026-06-13T00:00:00Z",
    ]
    assert found.json()[0]["flavors"] == {"h100": {"capacity": 8, "planned_gpus": 0, "jobs": 0}}


def test_members_read_but_do_not_write(alice, h100):
    assert client_for(alice).get(URL).status_code == 200
    assert client_for(alice).post(URL, window_data(), format="json").status_code == 403
    assert not BatchWindow.objects.exists()


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"end_time": "20:00", "end_day": ""}, "end_time"),
        ({"capacity": {"h100": 0}}, "capacity"),
        ({"capacity": {}}, "capacity"),
        ({"capacity": {"nope": 2}}, "capacity"),
        ({"timezone": "Mars/Base"}, "timezone"),
        ({"days": ["funday"]}, "days"),
        ({"days": "fri"}, "days"),
        ({"start_time": "25:00"}, "start_time"),
        ({"start_time": "8pm"}, "start_time"),
        ({"exceptions": ["someday"]}, "exceptions"),
        ({"price_factor": "1.5"}, "price_factor"),
        ({"capacity": {"h100": 17}}, "capacity"),
    ],
)
def test_bad_windows_are_field_errors(admin_user, h100, overrides, field):
    response = client_for(admin_user).post(URL, window_data(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not BatchWindow.objects.exists()


def test_batch_capacity_cannot_eat_approved_quota(admin_user, alice, vision, h100):
    from django.utils import timezone

    from gpu_requests import actions as quota_actions

    quota = submit(
        vision, h100, alice, gpus=12, starts_at=timezone.now() + timedelta(minutes=1), hours=24 * 30
    )
    quota_actions.approve(quota, by=admin_user)
    response = client_for(admin_user).post(URL, window_data(capacity={"h100": 5}), format="json")
    assert response.status_code == 400
    (message,) = response.json()["capacity"]
    assert message.startswith("H100 80GB: Weekend on Fri ")
    assert "would set 5 GPUs aside, but 12 of the flavor's 16 are already reserved" in message
    assert message.endswith("so at most 4 can be.")
    ok = client_for(admin_user).post(URL, window_data(capacity={"h100": 4}), format="json")
    assert ok.status_code == 201


def test_an_admin_updates_a_window(admin_user, h100):
    window_id = client_for(admin_user).post(URL, window_data(), format="json").json()["id"]
    response = client_for(admin_user).patch(
        f"{URL}{window_id}/", {"capacity": {"h100": 6}, "enabled": False}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["capacity"] == {"h100": 6}
    assert response.json()["enabled"] is False


# --- windows whose jobs no node can take ---
#
# The demo cluster's L4 pool is all spot (karpenter.sh/capacity-type=spot); a Job of
# a window without spot is kept off those nodes (manifests.may_run_on), so such a
# window could never run. The inventory says which nodes serve which flavor.

SPOT = "karpenter.sh/capacity-type=spot"


def test_a_window_without_spot_on_an_all_spot_flavor_is_refused(admin_user, demo_flavors, backend):
    cluster_actions.record_inventory()
    client = client_for(admin_user)
    response = client.post(URL, window_data(capacity={"l4": 8}, spot_allowed=False), format="json")
    assert response.status_code == 400, response.content
    (message,) = response.json()["capacity"]
    assert message == (
        f"L4: no node can run Weekend's jobs: the flavor's 24 GPUs are all on spot nodes "
        f"({SPOT}) and the window does not allow spot. Allow spot, or set none of this "
        "flavor aside."
    )
    assert not BatchWindow.objects.exists()

    created = client.post(URL, window_data(capacity={"l4": 8}, spot_allowed=True), format="json")
    assert created.status_code == 201, created.content
    url = f"{URL}{created.json()['id']}/"
    refused = client.patch(url, {"spot_allowed": False}, format="json")
    assert refused.status_code == 400 and "capacity" in refused.json(), refused.content
    assert BatchWindow.objects.get().spot_allowed is True


def test_a_window_without_spot_counts_only_the_nodes_its_jobs_can_use(
    admin_user, demo_flavors, backend
):
    # Any nvidia.com/gpu node: H100, A100, T4 on demand, L4 on spot.
    any_gpu = FlavorFactory(slug="any-gpu", name="Any GPU", node_selector={}, capacity=0)
    cluster_actions.record_inventory()
    any_gpu.refresh_from_db()
    on_demand = any_gpu.capacity - 24
    assert on_demand > 0
    client = client_for(admin_user)
    too_many = window_data(capacity={"any-gpu": on_demand + 1}, spot_allowed=False)
    response = client.post(URL, too_many, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["capacity"] == [
        f"Any GPU: Weekend would set {on_demand + 1} GPUs aside, but only {on_demand} of the "
        f"flavor's {any_gpu.capacity} are on nodes its jobs can use (the others are spot "
        f"nodes, {SPOT}, and the window does not allow spot), so at most {on_demand} can be."
    ]
    fitting = window_data(capacity={"any-gpu": on_demand}, spot_allowed=False)
    response = client.post(URL, fitting, format="json")
    assert response.status_code == 201, response.content
