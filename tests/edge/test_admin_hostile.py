"""Django admin pages the web-form fuzzer found answering 500 (issue 17)."""

from datetime import time

import pytest
from django.test import Client

from batch import actions as batch_actions
from tests.batch.test_admin import window_form
from tests.factories import UserFactory


@pytest.fixture
def root(db):
    client = Client(raise_request_exception=False)
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("team", ["x", "²", "-1"])
def test_the_budget_add_page_ignores_a_team_that_is_no_id(root, vision, team):
    assert root.get("/admin/billing/budget/add/", {"team": team}).status_code == 200


def test_a_membership_naming_no_user_is_a_form_error(root, vision, alice):
    membership = vision.memberships.get()
    data = {
        "name": "Vision",
        "slug": "vision",
        "archived_at_0": "",
        "archived_at_1": "",
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "1",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-id": str(membership.pk),
        "memberships-0-team": str(vision.pk),
        "memberships-0-user": "x",
        "memberships-0-role": "member",
    }
    response = root.post(f"/admin/teams/team/{vision.pk}/change/", data)
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()


def test_sync_rows_are_not_added_by_hand(root, vision):
    assert root.get("/admin/provisioning/teamsync/add/").status_code == 403
    assert root.post("/admin/provisioning/teamsync/add/", {}).status_code == 403


@pytest.mark.parametrize("field", ["start_time", "end_time"])
def test_a_window_time_that_is_no_time_is_a_form_error(root, admin_user, h100, field):
    response = root.post("/admin/batch/batchwindow/add/", window_form(**{field: "\x00"}))
    assert response.status_code == 200
    assert "Enter a valid time" in response.content.decode()
    window = batch_actions.save_window(
        None,
        by=admin_user,
        capacity={h100: 4},
        name="Nights",
        timezone="UTC",
        days=["mon"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    change = f"/admin/batch/batchwindow/{window.pk}/change/"
    assert root.post(change, window_form(**{field: "x"})).status_code == 200


@pytest.mark.parametrize("initial", ["0", "-99999999999999999999"])
def test_a_membership_posted_as_new_twice_is_a_form_error(root, vision, alice, initial):
    membership = vision.memberships.get()
    data = {
        "name": "Vision",
        "slug": "vision",
        "archived_at_0": "",
        "archived_at_1": "",
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": initial,
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-id": str(membership.pk),
        "memberships-0-team": str(vision.pk),
        "memberships-0-user": str(alice.pk),
        "memberships-0-role": "member",
    }
    response = root.post(f"/admin/teams/team/{vision.pk}/change/", data)
    assert response.status_code == 200
    assert "alice is already in this team." in response.content.decode()
    assert vision.memberships.count() == 1
