"""Reading what a client typed, the same way in every view, form and API.

Two traps sit under the obvious code. `str.isdigit()` is true for "²" and
other Unicode digits that `int()` refuses (and Django's lookups with them),
so a number check written with it lets a 500 through. And a `next` that
`url_has_allowed_host_and_scheme` accepts need not be a URL at all: Django's
`redirect("x")` takes a bare word for a view name and raises when it cannot
reverse it. Only ASCII digits are numbers here, and only paths on this site
are followed.
"""

from django.utils.http import url_has_allowed_host_and_scheme

# The one limit on what people type: a justification, a decision's or an
# exemption's reason, in the web form, the API and the admin alike. Longer text
# is refused with a field error (never cut); pages show a counter against it.
MAX_TEXT_LENGTH = 2000

# Past any id or count we keep, and within PostgreSQL's bigint.
MAX_WHOLE_NUMBER = 10**15


def whole_number(raw, *, minimum=0, maximum=MAX_WHOLE_NUMBER):
    """`raw` (a str) as an int when it is ASCII digits within [minimum, maximum], else None."""
    if not isinstance(raw, str):
        return None
    raw = raw.strip()
    if not raw or len(raw) > len(str(MAX_WHOLE_NUMBER)) or not (raw.isascii() and raw.isdigit()):
        return None
    value = int(raw)
    return value if minimum <= value <= maximum else None


def has_control_characters(text):
    """True if `text` holds a C0 control character (tab, CR, LF, NUL ...) or DEL."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def same_site_path(request, target, default):
    """`target` when it is a path on this site ("/requests/?page=2"), else `default`.

    Not "x" (a view name to `redirect()`), not "//host" or "/\\host" (another
    site to a browser), not "https://..." even to this host, and nothing with a
    control character.
    """
    if (
        isinstance(target, str)
        and target.startswith("/")
        and not target.startswith(("//", "/\\"))
        and not has_control_characters(target)
        and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure())
    ):
        return target
    return default
