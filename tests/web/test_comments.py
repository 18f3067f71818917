"""Comments on a request, mailed to the others in the thread."""

import pytest
from django.core import mail
from django.urls import reverse

from gpu_requests.models import Comment
from teams.models import AuditEvent


def post(client, req, body):
    return client.post(reverse("request_comment", args=[req.pk]), {"body": body}, follow=True)


def test_the_requester_comments_and_the_reviewers_hear_of_it(
    login, alice, carol, pending, admin_user, django_capture_on_commit_callbacks
):
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(login(alice), pending, "Could this start a day earlier?")
    page = response.content.decode()
    assert "Could this start a day earlier?" in page and "Comment added" in page
    # carol manages vision; no reviewer has spoken yet, so the reviewers are told too.
    assert [sorted(m.to) for m in mail.outbox] == [["admin@example.com", "carol@example.com"]]
    assert "Could this start a day earlier?" in mail.outbox[0].body
    event = AuditEvent.objects.get(action="comment")
    assert (event.actor, event.subject) == (alice, pending)


def test_a_reviewers_reply_goes_to_the_thread_not_to_the_author(
    login, alice, carol, pending, admin_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post(login(alice), pending, "Earlier?")
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        post(login(admin_user), pending, "Yes, from Monday.")
    assert [sorted(m.to) for m in mail.outbox] == [["alice@example.com", "carol@example.com"]]


@pytest.mark.parametrize("who", ["bob", "charlie"])
def test_outsiders_cannot_comment(login, request, pending, who):
    response = login(request.getfixturevalue(who)).post(
        reverse("request_comment", args=[pending.pk]), {"body": "hi"}
    )
    assert response.status_code == 404
    assert not Comment.objects.exists()


def test_a_plain_member_who_did_not_ask_cannot_comment(login, vision, pending):
    from tests.factories import UserFactory, add_member

    dave = add_member(vision, UserFactory(username="dave"))
    response = login(dave).post(reverse("request_comment", args=[pending.pk]), {"body": "hi"})
    assert response.status_code == 403


@pytest.mark.parametrize("body", ["   ", "x" * 4001, "a\x00b"])
def test_bad_comments_are_refused_with_a_message(login, alice, pending, body):
    response = post(login(alice), pending, body)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="comment-error" role="alert"' in page
    assert not Comment.objects.exists()


def test_a_refused_comment_stays_in_the_box_to_be_shortened(login, alice, pending):
    page = post(login(alice), pending, "y" * 4001).content.decode()
    assert "Keep a comment to 4,000 characters" in page
    assert ">" + "y" * 4001 + "</textarea>" in page


def test_the_added_message_is_in_the_comments_card_where_the_page_opens(login, alice, pending):
    response = post(login(alice), pending, "Thanks")
    assert response.redirect_chain[-1][0].endswith("#comments")
    page = response.content.decode()
    comments = page.split('id="comments"')[1].split("</section>")[0]
    assert "Comment added" in comments
    assert page.count("Comment added") == 1
