"""Ask for more time or more GPUs: a new request linked to approved or active quota."""

from datetime import timedelta

from django.urls import reverse

from gpu_requests import actions
from gpu_requests.models import QuotaAction, QuotaRequest
from tests.factories import next_week, submit

NEW = reverse("request_new")


def approved(vision, h100, alice, admin_user, **kwargs):
    return actions.approve(submit(vision, h100, alice, gpus=4, **kwargs), by=admin_user)


def test_the_detail_page_offers_both_on_approved_quota(login, alice, vision, h100, admin_user):
    held = approved(vision, h100, alice, admin_user)
    page = login(alice).get(reverse("request_detail", args=[held.pk])).content.decode()
    assert f"?follows={held.pk}&amp;kind=more_time" in page
    assert f"?follows={held.pk}&amp;kind=more_gpus" in page


def test_pending_requests_and_outsiders_get_no_follow_up(login, alice, bob, pending, admin_user):
    page = login(alice).get(reverse("request_detail", args=[pending.pk])).content.decode()
    assert "Ask for more" not in page


def test_more_time_is_pre_filled_from_the_end_as_long_again(login, alice, vision, h100, admin_user):
    held = approved(vision, h100, alice, admin_user, hours=48)
    page = login(alice).get(NEW, {"follows": held.pk, "kind": "more_time"}).content.decode()
    assert f'value="{held.ends_at:%Y-%m-%dT%H:%M}"' in page
    assert f'name="follows" value="{held.pk}"' in page
    assert f'Follows <a href="/requests/{held.pk}/">request #{held.pk}</a>' in page


def test_a_follow_up_is_a_linked_request_and_both_histories_show_the_chain(
    login, alice, vision, h100, admin_user
):
    held = approved(vision, h100, alice, admin_user, hours=48)
    client = login(alice)
    response = client.post(
        NEW,
        {
            "team": vision.pk,
            "flavor": h100.pk,
            "gpus": 4,
            "starts_at": f"{held.ends_at:%Y-%m-%dT%H:%M}",
            "ends_at": f"{held.ends_at + (held.ends_at - held.starts_at):%Y-%m-%dT%H:%M}",
            "justification": "The run needs two more days",
            "follows": held.pk,
            "follow_kind": "more_time",
        },
    )
    follow_up = QuotaRequest.objects.get(follows=held)
    assert response.status_code == 302
    assert follow_up.status == "pending" and follow_up.follow_kind == "more_time"
    assert follow_up.events.get().reason == f"Asks for more time on #{held.pk}"
    chain = held.events.get(action=QuotaAction.FOLLOW_UP)
    assert chain.reason == f"#{follow_up.pk} asks for more time" and chain.actor == alice
    page = client.get(reverse("request_detail", args=[held.pk])).content.decode()
    assert f'<a href="/requests/{follow_up.pk}/">#{follow_up.pk}</a> more time' in page
    page = client.get(reverse("request_detail", args=[follow_up.pk])).content.decode()
    assert f'<a href="/requests/{held.pk}/">#{held.pk}</a> (more time)' in page


def test_a_follow_up_must_match_the_team_and_flavor(login, alice, vision, h100, a100, admin_user):
    a100.refresh_from_db()
    held = approved(vision, h100, alice, admin_user)
    response = login(alice).post(
        NEW,
        {
            "team": vision.pk,
            "flavor": a100.pk,
            "gpus": 1,
            "starts_at": f"{held.starts_at:%Y-%m-%dT%H:%M}",
            "ends_at": f"{held.ends_at:%Y-%m-%dT%H:%M}",
            "justification": "more",
            "follows": held.pk,
        },
    )
    assert response.status_code == 200
    assert f"A follow-up of #{held.pk} is for H100 80GB." in response.content.decode()
    assert not QuotaRequest.objects.filter(follows=held).exists()


def test_another_teams_request_cannot_be_followed(login, bob, alice, vision, h100, admin_user):
    held = approved(vision, h100, alice, admin_user)
    page = login(bob).get(NEW, {"follows": held.pk, "kind": "more_gpus"}).content.decode()
    assert f'name="follows" value="{held.pk}"' not in page and "Follows <a" not in page


def test_the_cost_preview_works_without_javascript(login, alice, vision, h100):
    start = next_week()
    response = login(alice).post(
        NEW,
        {
            "team": vision.pk,
            "flavor": h100.pk,
            "gpus": 2,
            "starts_at": f"{start:%Y-%m-%dT%H:%M}",
            "ends_at": f"{start + timedelta(days=1):%Y-%m-%dT%H:%M}",
            "justification": "",
            "preview": "1",
        },
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "192.00 USD" in page  # 2 GPUs x 24 h x 4.00
    assert not QuotaRequest.objects.exists()


def test_more_gpus_comes_with_its_estimate(login, alice, vision, h100, admin_user):
    held = approved(vision, h100, alice, admin_user, hours=48)
    page = login(alice).get(NEW, {"follows": held.pk, "kind": "more_gpus"}).content.decode()
    feedback = page.split('id="request-feedback"')[1].split("</div>")[0]
    # One more GPU from the start to the same end: 1 x 48 h x 4.00.
    assert "Estimated cost" in feedback and "192.00 USD" in feedback
