"""Emails about quota requests, sent after the change that causes them commits."""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse

from gpu_requests import inputs
from gpu_requests.models import Comment, QuotaRequest
from teams.models import AuditEvent, Membership

log = logging.getLogger(__name__)


def one_line(text):
    """`text` with its control characters (line breaks above all) made spaces: a
    header with a line break raises BadHeaderError, and names come from users."""
    return "".join(" " if inputs.has_control_characters(c) else c for c in text)


def send(template, subject, recipients, context):
    """One email, text and HTML from `emails/<template>.txt|html`, to `recipients`.

    Mail goes out after the change commits, often one of several in a loop (one per
    submitter of an opening): a failure is logged and this returns False, so one bad
    email never stops the others.
    """
    if not recipients:
        return True
    context = {**context, "base_url": settings.PORTAL_BASE_URL}
    try:
        send_mail(
            one_line(subject),
            render_to_string(f"emails/{template}.txt", context),
            settings.DEFAULT_FROM_EMAIL,
            recipients,
            html_message=render_to_string(f"emails/{template}.html", context),
        )
    except Exception:
        log.exception("The %s email to %s was not sent", template, ", ".join(recipients))
        return False
    return True


def reviewer_emails():
    perm = Q(user_permissions__codename="review_quotarequest") | Q(
        groups__permissions__codename="review_quotarequest"
    )
    reviewers = get_user_model().objects.filter(is_active=True).exclude(email="")
    reviewers = reviewers.filter(perm | Q(is_superuser=True)).distinct()
    return sorted(reviewers.values_list("email", flat=True))


def send_new_request(quota_request_id):
    quota_request = QuotaRequest.objects.select_related("team", "flavor", "requested_by").get(
        pk=quota_request_id
    )
    send(
        "new_request",
        f"[GPU portal] {quota_request.team}: {quota_request.gpus} x {quota_request.flavor} "
        f"requested",
        reviewer_emails(),
        {"req": quota_request, "url": reverse("review_queue")},
    )


def send_decision(event_id):
    """Tell the requester about one decision (approve, reject, revoke)."""
    decision = AuditEvent.objects.select_related("actor").get(pk=event_id)
    quota_request = QuotaRequest.objects.select_related("team", "flavor", "requested_by").get(
        pk=decision.subject_id
    )
    requester = quota_request.requested_by
    send(
        "decision",
        f"[GPU portal] Your request #{quota_request.pk} was {decision.to_status}",
        [requester.email] if requester.email else [],
        {
            "req": quota_request,
            "decision": decision,
            "url": reverse("request_detail", args=[quota_request.pk]),
        },
    )


def thread_emails(quota_request, *, without):
    """Who follows a request's comments: the requester, its team's managers, everyone
    who commented, and the reviewers while none of them has (someone must read it)."""
    people = {quota_request.requested_by}
    people |= {
        m.user
        for m in quota_request.team.memberships.filter(role=Membership.Role.MANAGER).select_related(
            "user"
        )
    }
    people |= {c.author for c in quota_request.comments.select_related("author")}
    emails = {user.email for user in people if user.is_active and user.email and user != without}
    reviewers = set(reviewer_emails())
    if not reviewers & {user.email for user in people if user.email}:
        emails |= reviewers
    emails.discard(without.email)
    return sorted(emails)


def send_comment(comment_id):
    note = Comment.objects.select_related(
        "author", "quota_request__team", "quota_request__flavor", "quota_request__requested_by"
    ).get(pk=comment_id)
    quota_request = note.quota_request
    send(
        "comment",
        f"[GPU portal] {note.author.username} on request #{quota_request.pk}",
        thread_emails(quota_request, without=note.author),
        {
            "req": quota_request,
            "comment": note,
            "url": reverse("request_detail", args=[quota_request.pk]),
        },
    )
