"""One log line per request and per task, with the fields an operator filters
on; PORTAL_LOG_FORMAT=json turns them into JSON objects (portal/settings.py)."""

import logging
import time

request_logger = logging.getLogger("portal.requests")
task_logger = logging.getLogger("portal.tasks")


class RequestLogMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.monotonic()
        response = self.get_response(request)
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        user = getattr(request, "user", None)
        fields = {
            "method": request.method,
            "path": request.path_info,
            "status": response.status_code,
            "duration_ms": duration_ms,
            "user_id": user.pk if user is not None and user.is_authenticated else None,
        }
        level = logging.ERROR if response.status_code >= 500 else logging.INFO
        request_logger.log(
            level,
            "%(method)s %(path)s %(status)s %(duration_ms)sms",
            fields,
            extra=fields,
        )
        return response


_task_started = {}


def task_started(task_id=None, **kwargs):
    _task_started[task_id] = time.monotonic()


def task_finished(task_id=None, task=None, state=None, **kwargs):
    started = _task_started.pop(task_id, None)
    fields = {
        "task": getattr(task, "name", None),
        "task_id": task_id,
        "state": state,
        "duration_ms": None if started is None else round((time.monotonic() - started) * 1000, 1),
    }
    level = logging.ERROR if state == "FAILURE" else logging.INFO
    task_logger.log(level, "%(task)s %(task_id)s %(state)s %(duration_ms)sms", fields, extra=fields)
