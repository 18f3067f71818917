"""What a client sends as `next` or as a number never turns into a 500 (issue 17).

A `next` that is not a same-site path ("x", "a:b", another site) sends the
user to the default page after the action has been done; Unicode digits
("²", which `str.isdigit()` accepts and `int()` refuses) are not numbers.
"""

import pytest
from django.urls import reverse

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from teams import inputs
from tests.factories import submit


@pytest.fixture
def pending(vision, alice, h100):
    return submit(vision, h100, alice, gpus=2)


HOSTILE_NEXT = ["x", "a:b", "javascript:alert(1)", "//evil.example/", "/\\evil.example", "/a\r\nb"]


@pytest.mark.parametrize("target", HOSTILE_NEXT)
def test_an_approval_with_a_hostile_next_goes_to_the_request(client, admin_user, pending, target):
    client.force_login(admin_user)
    url = reverse("request_approve", args=[pending.pk])
    response = client.post(url, {"next": target})
    assert response.status_code == 302
    assert response["Location"] == reverse("request_detail", args=[pending.pk])
    pending.refresh_from_db()
    assert pending.status == QuotaRequest.Status.APPROVED


def test_a_same_site_next_is_followed(client, admin_user, pending):
    client.force_login(admin_user)
    url = reverse("request_reject", args=[pending.pk])
    response = client.post(url, {"next": "/review/?page=2"})
    assert response["Location"] == "/review/?page=2"


@pytest.mark.parametrize("follows", ["x", "²", "-1", "1" * 40])
def test_the_request_form_ignores_a_follows_that_is_no_id(client, alice, h100, follows):
    client.force_login(alice)
    response = client.get(reverse("request_new"), {"follows": follows})
    assert response.status_code == 200
    assert b"Follows <a" not in response.content


@pytest.mark.parametrize("follows", ["x", "²", "a:b"])
def test_a_posted_follows_that_is_no_id_is_an_error_not_a_500(client, alice, vision, h100, follows):
    client.force_login(alice)
    data = {"team": vision.pk, "flavor": h100.pk, "gpus": "1", "follows": follows}
    response = client.post(reverse("request_new"), {**data, "preview": "1"})
    assert response.status_code == 200
    assert b"Follows <a" not in response.content
    response = client.post(reverse("request_new"), data)
    assert response.status_code == 200
    assert not QuotaRequest.objects.exists()


def test_a_valid_follows_is_still_linked(client, alice, admin_user, vision, h100):
    held = submit(vision, h100, alice, gpus=1)
    actions.approve(held, by=admin_user)
    client.force_login(alice)
    response = client.get(reverse("request_new"), {"follows": str(held.pk), "kind": "more_gpus"})
    assert f'href="/requests/{held.pk}/">request #{held.pk}</a>'.encode() in response.content


def test_an_approval_in_the_queue_ignores_unicode_digits_in_shown(client, admin_user, pending):
    client.force_login(admin_user)
    url = reverse("request_approve", args=[pending.pk])
    response = client.post(url, {"shown": f"²,{pending.pk},x,-3"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == QuotaRequest.Status.APPROVED


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("12", 12), (" 7 ", 7), ("²", None), ("١٢", None), ("-1", None), ("x", None), ("", None)],
)
def test_whole_number_accepts_ascii_digits_only(raw, expected):
    assert inputs.whole_number(raw) == expected


def test_whole_number_bounds():
    assert inputs.whole_number("9" * 40) is None
    assert inputs.whole_number("5", minimum=6) is None
    assert inputs.whole_number("5", maximum=4) is None


@pytest.mark.parametrize("window", ["²", "١", "x", "-1"])
def test_the_batch_job_list_and_api_refuse_a_window_that_is_no_id(client, alice, window):
    client.force_login(alice)
    page = client.get(reverse("batch_jobs"), {"window": window})
    assert page.status_code == 200
    assert "Give a window id." in page.content.decode()
    api = client.get("/api/v1/batch-jobs/", {"window": window})
    assert api.status_code == 400
    assert api.json() == {"window": ["Give a window id."]}


def test_the_admin_window_form_refuses_unicode_digits_as_gpus(client, admin_user, h100):
    from tests.batch.test_admin import window_form

    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    response = client.post("/admin/batch/batchwindow/add/", window_form(capacity_text="h100=²"))
    assert response.status_code == 200
    assert "write slug=GPUs" in response.content.decode()


@pytest.mark.parametrize("month", ["2027-²", "²027-01", "2027-1x", "99999-01"])
def test_the_spend_page_answers_404_to_a_month_that_is_none(client, alice, vision, month):
    client.force_login(alice)
    response = client.get(reverse("billing_team", args=[vision.slug]), {"month": month})
    assert response.status_code == 404
