"""What every API view shares: the JSON parser, pagination, the answer to an
action's error, so every endpoint refuses bad input the same way
(teams/schema.py documents it), and the rule that only reviewers write."""

import io

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import parsers, permissions, status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.settings import api_settings

from teams import access, errors


def exception_handler(exc, context):
    """DRF's handler, plus the project's own errors in the same body shapes: an
    action's error is its status (403, 409, 503) with its `detail` (and the fields it adds),
    a model's validation error a 400 naming the fields."""
    # Not at the top: rest_framework.views reads DEFAULT_PARSER_CLASSES, this
    # module's JSONParser, when it is imported.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, errors.ActionError):
        return Response({"detail": str(exc), **exc.body()}, status=exc.status)
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            exc = ValidationError(exc.message_dict)
        else:
            exc = ValidationError({api_settings.NON_FIELD_ERRORS_KEY: exc.messages})
    return drf_exception_handler(exc, context)


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def holds_nul(data):
    """True if a NUL character is in any string of parsed JSON, keys included."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


NUL_MESSAGE = "Null characters are not allowed."  # DRF's own, for a field's text


def _nul_error(data):
    """400 naming the fields whose value holds a NUL (as a text field's own check
    would), or the body's when a key or a bare list holds one."""
    if isinstance(data, dict) and not any("\x00" in key for key in data):
        return ValidationError(
            {key: [NUL_MESSAGE] for key, value in data.items() if holds_nul(value)}
        )
    return ParseError("The body contains a NUL character.")


class JSONParser(parsers.JSONParser):
    """DRF's, with the body capped at DATA_UPLOAD_MAX_MEMORY_SIZE (DRF reads
    the stream itself, past Django's check), deep nesting a 400 (the decoder
    recurses once per level, and ~1,000 levels raise RecursionError), and a NUL
    character anywhere a 400, as the edge refuses one in the URL or a header
    (portal/edge.py): PostgreSQL cannot store or compare one, and a key of a
    dict reached a query before validation could say so."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        body = stream.read(limit + 1)
        if len(body) > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            data = super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if holds_nul(data):
            raise _nul_error(data)
        return data


def refuse_unknown_parameters(query_params, known):
    """A 400 naming each query parameter not in `known` (the ones the operation's
    schema declares): a misspelt or unsupported filter (`?period=2026-11`) is
    an error to point out, never silently an answer for everything."""
    unknown = sorted(set(query_params) - set(known))
    if unknown:
        takes = ", ".join(sorted(known)) or "no query parameters"
        raise ValidationError(
            {name: [f"Unknown query parameter; this endpoint takes {takes}."] for name in unknown}
        )


class Pagination(LimitOffsetPagination):
    """`?limit=` and `?offset=` as DRF has them, but a bad value is a 400
    naming it, not silently the default. Every list goes through here, so a
    query parameter neither these nor the view's `list_parameters` (its
    filters, as its schema declares them) is a 400 naming it too."""

    max_limit = 1000
    # Beyond any table we will have, and within PostgreSQL's bigint.
    max_offset = 10**12

    def _whole_number(self, request, name, minimum, maximum, default):
        raw = request.query_params.get(name)
        if raw is None:
            return default
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 13) or not (
            minimum <= int(raw) <= maximum
        ):
            raise ValidationError({name: [f"Use a whole number from {minimum} to {maximum}."]})
        return int(raw)

    def get_limit(self, request):
        return self._whole_number(request, "limit", 1, self.max_limit, self.default_limit)

    def get_offset(self, request):
        return self._whole_number(request, "offset", 0, self.max_offset, 0)

    def paginate_queryset(self, queryset, request, view=None):
        """DRF's, but a first page is read before counting: when it is also the
        last one, its length is the count (one query instead of two)."""
        known = ("limit", "offset", *getattr(view, "list_parameters", ()))
        refuse_unknown_parameters(request.query_params, known)
        limit = self.get_limit(request)
        if limit is None or self.get_offset(request) > 0:
            return super().paginate_queryset(queryset, request, view)
        results = list(queryset[:limit])
        if len(results) == limit:
            return super().paginate_queryset(queryset, request, view)
        self.request, self.limit, self.offset, self.count = request, limit, 0, len(results)
        return results

    def get_schema_operation_parameters(self, view):
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"] |= {"minimum": 1, "maximum": self.max_limit}
        offset["schema"] |= {"minimum": 0, "maximum": self.max_offset}
        return [limit, offset]


class APIViewSetMixin:
    pagination_class = Pagination


class Reviewers(permissions.IsAuthenticated):
    """Platform admins only, reads too: a member gets 403 before any parameter is
    read."""

    message = "Only platform admins can see this."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and access.can_review(request.user)


class ReviewersWrite(permissions.IsAuthenticated):
    """Everyone signed in reads; only reviewers write. DRF checks this before the
    body is parsed or validated, so a member gets 403 whatever they send: they
    learn nothing from validation, and nothing they send reaches a query. The
    view's `write_denied` is the 403's message."""

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        if request.method in permissions.SAFE_METHODS or access.can_review(request.user):
            return True
        self.message = getattr(view, "write_denied", "Only platform admins can do this.")
        return False
