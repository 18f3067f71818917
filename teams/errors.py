"""What an action raises when it cannot be carried out; the API answers each
with its status (teams/api.py `exception_handler`), pages with a message."""


class ActionError(Exception):
    """A request that cannot be carried out as things stand (HTTP 409).

    `body()` adds fields of its own to the API's `{"detail": ...}`."""

    status = 409

    def body(self):
        return {}


class IllegalTransition(ActionError):
    pass


class NotAllowed(ActionError):
    """The user may not do this (HTTP 403)."""

    status = 403


class Unavailable(ActionError):
    """The cluster (or another service the action needs) did not answer or
    refused; nothing was changed, try again (HTTP 503)."""

    status = 503
