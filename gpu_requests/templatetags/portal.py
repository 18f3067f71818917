from django import template
from django.utils import timezone
from django.utils.html import format_html

from teams import access, formats
from teams.inputs import MAX_TEXT_LENGTH

register = template.Library()


@register.filter
def when(value, fmt="%Y-%m-%d %H:%M"):
    """A datetime in the viewer's time zone, the zone named ("2026-12-01 10:00 CET")."""
    if not value:
        return ""
    local = timezone.localtime(value)
    return f"{local:{fmt}} {local.tzname()}"


@register.filter
def between(start, end):
    """ "between 2026-12-01 10:00 and 12:30 CET": a span in the viewer's zone, the
    zone named once and the end's date left out when they are the start's."""
    first, last = timezone.localtime(start), timezone.localtime(end)
    starts = f"{first:%Y-%m-%d %H:%M}"
    if first.tzname() != last.tzname():  # a clock change inside
        starts = when(start)
    ends = f"{last:%H:%M}" if last.date() == first.date() else f"{last:%Y-%m-%d %H:%M}"
    return f"between {starts} and {ends} {last.tzname()}"


@register.filter
def money(value):
    return formats.money(value)


@register.filter
def can_review(user):
    return user.is_authenticated and access.can_review(user)


@register.simple_tag
def counted(*id_parts):
    """Attributes of a text input counted against the one limit (static/js/counter.js);
    the counter's id is the parts joined by "-"."""
    counter_id = "-".join(str(part) for part in id_parts)
    return format_html('data-limit="{}" data-counter="{}"', MAX_TEXT_LENGTH, counter_id)


@register.simple_tag
def text_counter(*id_parts, value=""):
    """ "12 / 2,000" under a counted input, as the server counts it; the script
    keeps it current as the user types."""
    counter_id = "-".join(str(part) for part in id_parts)
    length = len(value or "")
    return format_html(
        '<span class="counter{}" id="{}" aria-live="polite">{} / {}</span>',
        " over" if length > MAX_TEXT_LENGTH else "",
        counter_id,
        f"{length:,}",
        f"{MAX_TEXT_LENGTH:,}",
    )


@register.filter
def hours(value):
    return formats.gpu_hours(value)


@register.filter
def sub(value, other):
    """`value - other`, for the free part of a quota."""
    return value - other


@register.filter
def duration(value):
    """A timedelta in words a person reads at a glance: "2 h 05 min", "45 min", "20 s"."""
    if value is None:
        return ""
    seconds = int(value.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
