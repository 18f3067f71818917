"""What people are told, as plain data: one `Notice` per thing that happened.

A feature that wants people told (gpu_requests' quota notices, batch's job
outcomes, idle's warnings) builds a Notice and hands it to `hooks.notice` in
its transaction; each channel registered with `hooks.on_notice` (the
webhooks) reads only the Notice and renders it its own way.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone


@dataclass(frozen=True)
class Notice:
    event: str  # request_submitted, request_approved, ...: [a-z_]+
    team_id: int | None
    title: str  # one line, plain text
    url: str  # absolute: the page to open
    text: str = ""  # what someone wrote (justification, reason, comment), if anything
    facts: tuple = ()  # ((label, value), ...) shown beside the title
    data: dict = field(default_factory=dict)  # the same for machines: ids, statuses
    at: object = field(default_factory=timezone.now)


def absolute(path):
    """`path` on this portal as a full URL (PORTAL_BASE_URL), for a notice's link."""
    return settings.PORTAL_BASE_URL.rstrip("/") + path
