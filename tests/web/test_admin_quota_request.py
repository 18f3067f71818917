"""The Django admin's quota requests: decisions go through the actions, edits don't exist."""

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.factories import submit


@pytest.fixture
def admin_client(client, admin_user):
    admin_user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["change_quotarequest", "delete_quotarequest", "view_auditevent"]
        )
    )
    client.force_login(admin_user)
    return client


def test_an_approved_request_cannot_be_edited_in_the_admin(admin_client, vision, alice, h100):
    quota_request = submit(vision, h100, alice, gpus=2)
    url = f"/admin/gpu_requests/quotarequest/{quota_request.pk}/change/"
    admin_client.post(url, {"gpus": "16", "ends_at_0": "", "ends_at_1": ""})
    assert QuotaRequest.objects.get().gpus == 2


def test_requests_cannot_be_deleted_with_their_history(admin_client, vision, alice, h100):
    quota_request = submit(vision, h100, alice)
    url = f"/admin/gpu_requests/quotarequest/{quota_request.pk}/delete/"
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert QuotaRequest.objects.exists()


def test_the_approve_action_goes_through_the_capacity_check(
    admin_client, vision, alice, h100, admin_user
):
    first = submit(vision, h100, alice, gpus=10)
    second = submit(vision, h100, alice, gpus=10)
    response = admin_client.post(
        "/admin/gpu_requests/quotarequest/",
        {"action": "approve_selected", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    statuses = dict(QuotaRequest.objects.values_list("pk", "status"))
    assert sorted(statuses.values()) == ["approved", "pending"]
    assert "Not enough H100 80GB capacity" in response.content.decode()


def test_the_audit_list_costs_no_query_per_row(admin_client, admin_user, vision, alice, h100):
    def rows():
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get("/admin/teams/auditevent/")
        assert response.status_code == 200
        return len(queries), response.content.decode().count('class="field-action"')

    actions.reject(submit(vision, h100, alice, gpus=1), by=admin_user)
    few = rows()
    for _ in range(6):
        actions.approve(submit(vision, h100, alice, gpus=1), by=admin_user)
    many = rows()
    assert many[1] > few[1] and many[0] == few[0], (few, many)
