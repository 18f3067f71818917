"""The edge: input no view should ever see is refused here, once, with 400.

PostgreSQL cannot store or compare a NUL character, so one in a path, a query
parameter, a cookie (the session key) or a header (the API token) would reach
a query and fail there as a 500. Numbers too large for a date or a C integer
(the admin's `?starts_at__year=99999999999999999999`) fail deep in Django the
same way. Both are the client's fault: 400, with a JSON body under /api/ and a
plain page elsewhere.
"""

import logging
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def is_api(request):
    return request.path_info.startswith(API_PREFIX)


def error_response(request, status, detail):
    """The error body every API error has (`{"detail": ...}`), or a plain page."""
    if is_api(request):
        return JsonResponse({"detail": detail}, status=status)
    # No request context: the session or the user may be what is broken.
    page = loader.get_template("400.html")
    return HttpResponse(page.render({"detail": detail, "status": status}), status=status)


def _nul_in(request):
    meta = request.META
    if "\x00" in request.path_info or b"\x00" in unquote_to_bytes(meta.get("QUERY_STRING", "")):
        return "URL"
    for key, value in meta.items():
        if key.startswith("HTTP_") and "\x00" in value:
            return key.removeprefix("HTTP_").replace("_", "-").title() + " header"
    # A quoted cookie may spell NUL as an octal escape ("\000"): check parsed values too.
    if any("\x00" in name or "\x00" in value for name, value in request.COOKIES.items()):
        return "Cookie"
    return None


class RefuseBadInput:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = _nul_in(request)
        if where:
            return error_response(request, 400, f"The {where} contains a NUL character.")
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return error_response(request, 413, f"The request body is larger than {limit} bytes.")
        if isinstance(exception, OverflowError):
            logger.info("400 for %s: %s", request.path_info, exception)
            return error_response(request, 400, "A number in the request is out of range.")
        return None


# handler400/403/404/500 (portal/urls.py): JSON under /api/, Django's pages elsewhere.


def bad_request(request, exception=None):
    return error_response(request, 400, "Bad request.")


def server_error(request):
    if is_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return defaults.server_error(request)


def page_not_found(request, exception=None):
    if is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def permission_denied(request, exception=None):
    if is_api(request):
        return JsonResponse({"detail": "You do not have permission to do this."}, status=403)
    return defaults.permission_denied(request, exception)
