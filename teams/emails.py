"""Sending one email, the same way for every app: after the change commits, text
and HTML from the app's templates, a failure logged and never raised."""

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

from teams import inputs

log = logging.getLogger(__name__)


def one_line(text):
    """`text` with its control characters (line breaks above all) made spaces: a
    header with a line break raises BadHeaderError, and names come from users.
    Invisible format characters (a direction override, a zero-width space) are
    written out as [U+XXXX] (`inputs.shown`), so a subject reads as what it is."""
    return "".join(" " if inputs.has_control_characters(c) else c for c in inputs.shown(text))


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
