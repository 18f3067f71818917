"""Emails about quota requests, sent after the change that causes them commits."""

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse

from gpu_requests.models import Comment, QuotaRequest
from teams import access
from teams.emails import send
from teams.models import AuditEvent, Membership


def reviewer_emails():
    perm = Q(user_permissions__codename=access.REVIEW_PERMISSION) | Q(
        groups__permissions__codename=access.REVIEW_PERMISSION
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
