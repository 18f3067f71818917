from datetime import timedelta

import pytest
from django import forms
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from gpu_requests.forms import QuotaRequestForm
from gpu_requests.models import QuotaRequest
from tests.factories import FlavorFactory, next_week

URL = reverse("request_new")


def local(dt):
    """How <input type="datetime-local"> sends a time (read as UTC)."""
    return dt.strftime("%Y-%m-%dT%H:%M")


@pytest.fixture
def data(vision, h100):
    start = next_week()
    return {
        "team": vision.pk,
        "flavor": h100.pk,
        "gpus": "2",
        "starts_at": local(start),
        "ends_at": local(start + timedelta(hours=24)),
        "justification": "Fine-tune the detector",
    }


def test_it_redirects_anonymous_to_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_shows_the_form_with_prices_and_capacity(login, alice, h100):
    response = login(alice).get(URL)
    assert response.status_code == 200
    assert b'type="datetime-local"' in response.content
    assert b"H100 80GB \xc2\xb7 4 USD/GPU-hour \xc2\xb7 16 in the cluster" in response.content
    assert b"Starts (UTC)" in response.content


def test_it_preselects_alices_only_team(login, alice, vision, nlp, h100):
    response = login(alice).get(URL)
    assert f'<option value="{vision.pk}" selected>'.encode() in response.content
    assert b"NLP" not in response.content


def test_it_hides_retired_flavors(login, alice, h100):
    FlavorFactory(slug="k80", name="K80 retired", is_active=False)
    response = login(alice).get(URL)
    assert b"K80 retired" not in response.content


def test_it_submits_and_redirects_to_the_detail(
    login, alice, admin_user, data, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = login(alice).post(URL, data)
    req = QuotaRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("request_detail", args=[req.pk])
    assert req.gpus == 2 and req.requested_by == alice
    assert req.starts_at == next_week()  # read as UTC
    assert str(req.estimated_cost) == "192.00"
    # Reviewers hear about it.
    assert [m.to for m in mail.outbox] == [["admin@example.com"]]
    assert "2 x H100 80GB" in mail.outbox[0].subject
    # Money in the one format of every page: two decimals and the currency.
    assert "Estimated cost: 192.00 USD" in mail.outbox[0].body
    assert "192.00 USD" in mail.outbox[0].alternatives[0][0]
    page = login(alice).get(response["Location"])
    assert f"Request #{req.pk} submitted".encode() in page.content


def test_it_accepts_open_ended_requests(login, alice, data):
    data["ends_at"] = ""
    response = login(alice).post(URL, data)
    assert response.status_code == 302
    assert QuotaRequest.objects.get().ends_at is None


def test_charlie_has_no_team_to_choose(login, charlie, data):
    response = login(charlie).post(URL, data)
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content
    assert not QuotaRequest.objects.exists()


def assert_field_error(response, field, text):
    assert response.status_code == 200
    page = response.content.decode()
    slot = page.split(f'id="errors-{field}">')[1].split("</div>")[0]
    assert text in slot, slot
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("gpus", "0", "Ask for at least 1 GPU."),
        ("gpus", "-3", "Ask for at least 1 GPU."),
        ("gpus", "17", "The cluster has 16 H100 80GB in all"),
        ("gpus", "two", "Enter a whole number."),
        ("flavor", "999999", "Select a valid choice"),
        ("justification", "x" * 2001, "at most 2000 characters"),
        ("justification", "", "This field is required."),
        ("starts_at", "yesterday", "Enter a valid date/time."),
    ],
)
def test_it_shows_field_errors(login, alice, data, field, value, error):
    data[field] = value
    assert_field_error(login(alice).post(URL, data), field, error)


def test_it_refuses_an_end_before_the_start(login, alice, data):
    data["ends_at"] = data["starts_at"]
    assert_field_error(login(alice).post(URL, data), "ends_at", "The end must be after the start.")


def test_it_refuses_a_start_in_the_past(login, alice, data):
    data["starts_at"] = local(timezone.now() - timedelta(days=1))
    assert_field_error(login(alice).post(URL, data), "starts_at", "The start is in the past.")


def test_it_refuses_a_tampered_team(login, alice, nlp, data):
    data["team"] = nlp.pk
    assert_field_error(login(alice).post(URL, data), "team", "Select a valid choice")


def test_it_keeps_what_was_typed_after_an_error(login, alice, data):
    data["gpus"] = "0"
    response = login(alice).post(URL, data)
    assert f'value="{data["starts_at"]}"'.encode() in response.content
    assert b"Fine-tune the detector" in response.content


def test_it_lets_reviewers_request_for_any_team(login, admin_user, nlp, data):
    data["team"] = nlp.pk
    response = login(admin_user).post(URL, data)
    assert response.status_code == 302
    assert QuotaRequest.objects.get().team == nlp


class TestLiveValidation:
    def post(self, client, data):
        return client.post(URL + "?validate=1", data, HTTP_HX_REQUEST="true")

    def test_it_returns_only_the_feedback_partial_with_the_estimate(self, login, alice, data):
        response = self.post(login(alice), data)
        page = response.content.decode()
        assert response.status_code == 200
        assert page.lstrip().startswith('<div id="request-feedback"')
        assert "<html" not in page and "<form" not in page
        assert "192.00 USD" in page  # 2 GPUs x 24 h x 4.00
        assert not QuotaRequest.objects.exists()

    def test_it_shows_hourly_cost_when_open_ended(self, login, alice, data):
        data["ends_at"] = ""
        response = self.post(login(alice), data)
        assert b"8.00 USD</strong> per hour" in response.content
        assert b"192.00 USD per day" in response.content

    def test_it_swaps_field_errors_out_of_band(self, login, alice, data):
        data["gpus"] = "40"
        response = self.post(login(alice), data)
        page = response.content.decode()
        assert (
            '<div class="field-errors" id="errors-gpus" hx-swap-oob="true"><p>The cluster' in page
        )
        # Fields without errors get an empty slot, which clears an earlier error.
        assert '<div class="field-errors" id="errors-team" hx-swap-oob="true"></div>' in page

    def test_it_does_not_nag_about_fields_not_filled_in_yet(self, login, alice, data):
        response = self.post(login(alice), {"team": data["team"], "gpus": "2"})
        assert b"This field is required" not in response.content
        assert b"to see the cost" in response.content


def test_it_shows_errors_raised_by_submit_as_field_errors(login, alice, data, monkeypatch):
    # As if the form's check had passed and things changed before submit() ran.
    monkeypatch.setattr(QuotaRequestForm, "clean", forms.Form.clean)
    data["gpus"] = "0"
    assert_field_error(login(alice).post(URL, data), "gpus", "Ask for at least 1 GPU.")


def test_it_counts_the_justification_instead_of_cutting_it(login, alice, data):
    page = login(alice).get(URL).content.decode()
    textarea = page.split('<textarea name="justification"')[1].split(">")[0]
    assert "maxlength" not in textarea  # a browser would drop what is pasted past it
    assert 'data-limit="2000"' in textarea
    assert 'id="count-justification" aria-live="polite">0 / 2,000<' in page
    data["justification"] = "x" * 2001
    page = login(alice).post(URL, data).content.decode()
    assert '<span class="counter over" id="count-justification"' in page
    assert ">2,001 / 2,000<" in page
