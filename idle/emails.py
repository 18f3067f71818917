"""Idle notices by email to the workload's team (the people who can act on it),
sent after the evaluation's transaction commits."""

from django.contrib.auth import get_user_model

from teams.emails import send


def send_notice(team_id, title, url, facts, recipients=None):
    """One email to `recipients`, or every active member of the team with an
    address (one query)."""
    recipients = [r for r in recipients or () if r] or list(
        get_user_model()
        .objects.filter(memberships__team_id=team_id, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    send(
        "idle_notice",
        f"[GPU portal] {title}",
        recipients,
        {"title": title, "url": url, "facts": facts},
    )
