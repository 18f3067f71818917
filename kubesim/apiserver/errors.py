"""Kubernetes API errors, rendered as the `Status` bodies the real apiserver sends.

Messages follow k8s.io/apimachinery/pkg/api/errors so that clients (and people
reading logs) see exactly what a real cluster would say.
"""


def qualified_resource(resource: str, group: str = "") -> str:
    """`jobs.batch`, or just `pods` for the core group."""
    return f"{resource}.{group}" if group else resource


class ApiError(Exception):
    code = 500
    reason = "InternalError"
    list_meta: dict | None = None  # the Status's ListMeta (a 410's fresh continue token)

    def __init__(self, message: str, *, details: dict | None = None, headers: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def to_status(self) -> dict:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del status["reason"]  # Go's omitempty: an unclassified error has none
        if self.details:
            status["details"] = self.details
        return status


class TypedPatchError(ApiError):
    """What a server-side apply of fields the schema does not have answers: a 500
    with no reason (the apiserver does not classify it)."""

    code = 500
    reason = ""


def _details(name: str, group: str, kind: str) -> dict:
    details = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


class NotFound(ApiError):
    code = 404
    reason = "NotFound"

    def __init__(self, *, resource: str = "", group: str = "", name: str = "", message=None):
        if message is None:
            message = f'{qualified_resource(resource, group)} "{name}" not found'
        super().__init__(message, details=_details(name, group, resource) if resource else None)


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"

    def __init__(self, *, resource: str, group: str = "", name: str):
        message = f'{qualified_resource(resource, group)} "{name}" already exists'
        super().__init__(message, details=_details(name, group, resource))


class Conflict(ApiError):
    """409 Conflict: a stale resourceVersion, or a server-side apply conflict."""

    code = 409
    reason = "Conflict"

    def __init__(
        self,
        *,
        resource: str = "",
        group: str = "",
        name: str = "",
        message: str | None = None,
        causes: list | None = None,
    ):
        if message is None:
            message = (
                f'Operation cannot be fulfilled on {qualified_resource(resource, group)} "{name}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again"
            )
        details = _details(name, group, resource) if resource else {}
        if causes:
            details["causes"] = causes
        super().__init__(message, details=details)


class FieldError:
    """One `field.Error` from apimachinery's validation package."""

    REASONS = {
        "Invalid": "FieldValueInvalid",
        "Required": "FieldValueRequired",
        "NotSupported": "FieldValueNotSupported",
        "Duplicate": "FieldValueDuplicate",
        "Forbidden": "FieldValueForbidden",
        "TooLong": "FieldValueTooLong",
        "TypeInvalid": "FieldValueTypeInvalid",
    }

    def __init__(self, kind: str, field: str, value=None, detail: str = ""):
        self.kind = kind
        self.field = field
        self.value = value
        self.detail = detail

    def body(self) -> str:
        if self.kind == "Required":
            text = "Required value"
        elif self.kind == "Forbidden":
            text = "Forbidden"
        elif self.kind == "Duplicate":
            text = f"Duplicate value: {_go_repr(self.value)}"
        elif self.kind == "NotSupported":
            text = f"Unsupported value: {_go_repr(self.value)}"
        elif self.kind == "TooLong":
            text = "Too long"
        elif self.kind == "TypeInvalid":
            text = f"Invalid value: {_go_repr(self.value)}"
        else:
            text = f"Invalid value: {_go_repr(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict:
        return {"reason": self.REASONS[self.kind], "message": self.body(), "field": self.field}


def _go_repr(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(_go_repr(v) for v in value) + "}"  # Go's %#v
    return '"object"' if isinstance(value, dict) else '"array"'


class Invalid(ApiError):
    code = 422
    reason = "Invalid"

    def __init__(self, *, kind: str, group: str = "", name: str, errors: list[FieldError]):
        qualified_kind = f"{kind}.{group}" if group else kind
        if len(errors) == 1:
            listing = str(errors[0])
        else:
            listing = "[" + ", ".join(str(e) for e in errors) + "]"
        message = f'{qualified_kind} "{name}" is invalid: {listing}'
        details = _details(name, group, kind)
        details["causes"] = [e.cause() for e in errors]
        super().__init__(message, details=details)
        self.errors = errors


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"

    def __init__(self, *, resource: str = "", group: str = "", name: str = "", message: str = ""):
        """`Forbidden(resource="pods", name="x", message="exceeded quota: ...")` renders
        as `pods "x" is forbidden: exceeded quota: ...`; without a resource the message
        is used as it is."""
        if resource:
            full = f'{qualified_resource(resource, group)} "{name}" is forbidden: {message}'
            details = _details(name, group, resource)
        else:
            full, details = message, None
        super().__init__(full, details=details)


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"

    def __init__(
        self, message: str = "the server does not allow this method on the requested resource"
    ):
        super().__init__(message)


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, content_type: str, accepted: str = "application/json, application/yaml"):
        super().__init__(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{accepted} (got {content_type})"
        )


class PatchFailed(ApiError):
    """A JSON patch that decodes but does not apply (a failed `test`, a missing path):
    the apiserver's generic 422, which does not repeat the patch library's reason."""

    code = 422
    reason = "Invalid"

    def __init__(self):
        super().__init__("the server rejected our request due to an error in our request")


class Expired(ApiError):
    code = 410
    reason = "Expired"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"

    def __init__(self, message: str = "Too many requests, please try again later.", retry_after=1):
        super().__init__(
            message,
            details={"retryAfterSeconds": int(retry_after)},
            headers={"Retry-After": str(int(retry_after))},
        )


class InternalError(ApiError):
    code = 500
    reason = "InternalError"

    def __init__(self, message: str = "Internal error occurred: injected fault"):
        super().__init__(message)


class ServiceUnavailable(ApiError):
    code = 503
    reason = "ServiceUnavailable"

    def __init__(self, message: str = "the server is currently unable to handle the request"):
        super().__init__(message)
