"""Admin pages for windows and the image allowlist: through the actions' checks."""

from batch.models import BatchWindow, ImageRule
from cluster import actions as cluster_actions


def window_form(**overrides):
    data = {
        "name": "Weekend",
        "timezone": "Europe/Berlin",
        "days_text": "fri",
        "start_time": "20:00",
        "end_time": "06:00",
        "end_day": "mon",
        "exceptions_text": "2026-12-25",
        "capacity_text": "h100=4",
        "price_factor": "0.5",
        "spot_allowed": "on",
        "enabled": "on",
    }
    return {**data, **overrides}


def test_an_admin_adds_a_window(client, admin_user, h100):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    response = client.post("/admin/batch/batchwindow/add/", window_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    window = BatchWindow.objects.get()
    assert window.days == ["fri"] and window.exceptions == ["2026-12-25"]
    assert {c.flavor.slug: c.gpus for c in window.capacities.all()} == {"h100": 4}


def test_the_admin_form_shows_rule_and_capacity_errors(client, admin_user, h100):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    response = client.post(
        "/admin/batch/batchwindow/add/",
        window_form(end_day="", end_time="20:00", capacity_text="h100=17"),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "The end time must differ from the start time." in page
    response = client.post("/admin/batch/batchwindow/add/", window_form(capacity_text="h100=17"))
    assert "would set 17 GPUs aside, but the flavor has 16" in response.content.decode()
    assert not BatchWindow.objects.exists()


def test_the_admin_refuses_a_window_without_spot_on_an_all_spot_flavor(
    client, admin_user, demo_flavors, backend
):
    cluster_actions.record_inventory()  # the demo cluster's L4 nodes are all spot
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    form = window_form(capacity_text="l4=8")
    del form["spot_allowed"]  # an unticked box is not sent
    response = client.post("/admin/batch/batchwindow/add/", form)
    assert response.status_code == 200
    assert "L4: no node can run Weekend&#x27;s jobs" in response.content.decode()
    assert not BatchWindow.objects.exists()
    response = client.post("/admin/batch/batchwindow/add/", window_form(capacity_text="l4=8"))
    assert response.status_code == 302
    assert BatchWindow.objects.get().spot_allowed


def test_the_allowlist_refuses_a_prefix_that_is_not_one(client, admin_user):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    response = client.post("/admin/batch/imagerule/add/", {"prefix": "Not A Prefix"})
    assert response.status_code == 200
    assert not ImageRule.objects.exists()
    client.post("/admin/batch/imagerule/add/", {"prefix": "nvcr.io/nvidia/"})
    assert ImageRule.objects.get().prefix == "nvcr.io/nvidia/"
