"""What people are told when a quota request changes: one call per event.

Each call queues the email for after the commit (a decision's to a worker, task
`gpu_requests.send_decision`, so the request that decides renders none) and hands one
`teams.notices.Notice` to every channel registered with `hooks.on_notice` inside the
transaction, so a channel that records work (the webhooks' deliveries) commits
or rolls back with the change. Channels read only the Notice: it says what
happened in plain words and plain data, whatever the channel makes of it.
"""

from django.db import transaction
from django.utils.module_loading import import_string

from gpu_requests import emails
from gpu_requests.models import QuotaRequest
from teams import hooks
from teams.notices import Notice, absolute

# The decision email's task, named by its path as the outbox names its tasks:
# gpu_requests.tasks sits above this module (its lifecycle task calls the actions,
# which tell people through here) and is imported when queueing.
DECISION_TASK = "gpu_requests.tasks.send_decision"


def _facts(quota_request):
    ends = f"{quota_request.ends_at:%Y-%m-%d %H:%M} UTC" if quota_request.ends_at else "open-ended"
    return (
        ("Team", quota_request.team.name),
        ("GPUs", f"{quota_request.gpus} x {quota_request.flavor.name}"),
        ("Period", f"{quota_request.starts_at:%Y-%m-%d %H:%M} UTC to {ends}"),
        ("Status", quota_request.get_status_display()),
    )


def _data(quota_request):
    return {
        "quota_request": quota_request.pk,
        "team": quota_request.team.slug,
        "flavor": quota_request.flavor.slug,
        "gpus": quota_request.gpus,
        "starts_at": quota_request.starts_at.isoformat(),
        "ends_at": quota_request.ends_at.isoformat() if quota_request.ends_at else None,
        "status": quota_request.status,
    }


def submitted(quota_request):
    transaction.on_commit(lambda: emails.send_new_request(quota_request.pk), robust=True)
    who = quota_request.requested_by.username
    hooks.notice(
        Notice(
            event="request_submitted",
            team_id=quota_request.team_id,
            title=f"{who} asks for {quota_request.gpus} x {quota_request.flavor.name} for "
            f"{quota_request.team.name} (request #{quota_request.pk})",
            url=absolute(quota_request.get_absolute_url()),
            text=quota_request.justification,
            facts=_facts(quota_request),
            data={**_data(quota_request), "by": who},
        )
    )


def decided(quota_request, decision):
    """An approval, rejection or revocation (`decision` is its AuditEvent)."""
    # Rendered and sent by a worker. retry=False and robust: a broker that is down is
    # logged at once (the email is lost, as it was with a mail server that is down)
    # and neither holds up nor undoes the decision.
    send = import_string(DECISION_TASK)  # now: a wrong path raises, not logged after commit
    transaction.on_commit(
        lambda: send.apply_async((decision.pk,), retry=False),
        robust=True,
    )
    who = decision.actor.username if decision.actor else "the portal"
    hooks.notice(
        Notice(
            event=f"request_{decision.to_status}",
            team_id=quota_request.team_id,
            title=f"Request #{quota_request.pk} ({quota_request.team.name}, "
            f"{quota_request.gpus} x {quota_request.flavor.name}) was {decision.to_status} "
            f"by {who}",
            url=absolute(quota_request.get_absolute_url()),
            text=decision.reason,
            facts=_facts(quota_request),
            data={**_data(quota_request), "status": decision.to_status, "by": who},
        )
    )


def ended_early(quota_request, event):
    """Quota given back before its end (`event`: its AuditEvent): the channels are
    told; no email, as for an expiry (whoever gave it back knows)."""
    who = event.actor.username
    hooks.notice(
        Notice(
            event="request_ended_early",
            team_id=quota_request.team_id,
            title=f"{who} gave back request #{quota_request.pk} ({quota_request.team.name}, "
            f"{quota_request.gpus} x {quota_request.flavor.name}): its quota ended early",
            url=absolute(quota_request.get_absolute_url()),
            text=event.reason,
            facts=_facts(quota_request),
            data={**_data(quota_request), "by": who},
        )
    )


def commented(note):
    transaction.on_commit(lambda: emails.send_comment(note.pk), robust=True)
    quota_request = note.quota_request
    hooks.notice(
        Notice(
            event="request_commented",
            team_id=quota_request.team_id,
            title=f"{note.author.username} commented on request #{quota_request.pk} "
            f"({quota_request.team.name})",
            url=absolute(quota_request.get_absolute_url()),
            text=note.body,
            facts=_facts(quota_request),
            data={**_data(quota_request), "comment": note.pk, "by": note.author.username},
        )
    )


_LIFECYCLE = {  # status -> (event, what happened)
    QuotaRequest.Status.ACTIVE: ("request_activated", "is active: its quota is on the cluster"),
    QuotaRequest.Status.EXPIRED: (
        "request_expired",
        "expired: its quota was taken off the cluster",
    ),
}


def moved_by_sweep(pks, to):
    """Requests the lifecycle sweep activated or expired (no email, as before): one
    query for their names, then each channel once for all of them."""
    rows = QuotaRequest.objects.filter(pk__in=pks).select_related("team", "flavor")
    event, happened = _LIFECYCLE[to]
    hooks.notices(
        [
            Notice(
                event=event,
                team_id=quota_request.team_id,
                title=f"Request #{quota_request.pk} ({quota_request.team.name}, "
                f"{quota_request.gpus} x {quota_request.flavor.name}) {happened}",
                url=absolute(quota_request.get_absolute_url()),
                facts=_facts(quota_request),
                data=_data(quota_request),
            )
            for quota_request in rows.order_by("pk")
        ]
    )
