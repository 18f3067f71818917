"""What every app's API reads and writes alike: the error body, a timestamp
that must say its zone, and the reason given for a change."""

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from teams.inputs import MAX_TEXT_LENGTH, validate_visible


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 timestamp that must say its offset.

    DRF would read a naive time in the server's zone (PORTAL_TIME_ZONE), which
    a client cannot see; a quota period off by hours is worse than a 400.
    """

    default_error_messages = {
        "naive": "Include a time zone, e.g. 2030-01-31T09:00:00Z or 2030-01-31T09:00:00+01:00.",
    }

    def to_internal_value(self, value):
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:
                parsed = None  # well-formed but impossible, e.g. month 13: DRF says so
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
        return super().to_internal_value(value)


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=MAX_TEXT_LENGTH,
        validators=[validate_visible],
        required=False,
        allow_blank=True,
        default="",
        help_text="Kept in the request's history and, for decisions, emailed to the requester.",
    )
