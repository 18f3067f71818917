"""Reading what a client typed, the same way in every view, form and API.

Two traps sit under the obvious code. `str.isdigit()` is true for "²" and
other Unicode digits that `int()` refuses (and Django's lookups with them),
so a number check written with it lets a 500 through. And a `next` that
`url_has_allowed_host_and_scheme` accepts need not be a URL at all: Django's
`redirect("x")` takes a bare word for a view name and raises when it cannot
reverse it. Only ASCII digits are numbers here, and only paths on this site
are followed.
"""

import unicodedata

from django.core.exceptions import ValidationError
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


# The invisible format characters (Unicode category Cf, as Python 3.11's
# unicodedata 14.0 has them) as ranges of code points: the schema's pattern of a
# text that refuses them (teams.schema). tests/edge/test_hidden_characters.py
# checks them against unicodedata.
HIDDEN_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip


def is_hidden(char):
    """True for an invisible format character (Unicode category Cf): the bidi
    overrides and isolates (U+202A-U+202E, U+2066-U+2069) that make "gpu\u202eexe"
    display as "gpuexe" reversed, zero-width spaces and joiners (U+200B-U+200D),
    the marks U+200E/U+200F, the word joiner U+2060, the BOM U+FEFF, soft hyphens."""
    return unicodedata.category(char) == "Cf"


def has_hidden_characters(text):
    """True if `text` holds an invisible format character (`is_hidden`): what a
    many-line text (a reason, a justification, a comment) may not hold."""
    return any(is_hidden(c) for c in text)


def has_control_characters(text):
    """True if `text` holds a C0 control character (tab, CR, LF, NUL ...), DEL or an
    invisible format character (`is_hidden`): what a one-line name may not hold."""
    return any(ord(c) < 32 or ord(c) == 127 or is_hidden(c) for c in text)


def _named(text, test):
    found = sorted({c for c in text if test(c)})
    return ", ".join(f"U+{ord(c):04X}" for c in found[:3])


ONE_LINE_MESSAGE = (
    "A name is one line of visible characters: no line breaks, tabs, other control "
    "characters or invisible ones such as direction overrides or zero-width spaces"
)
HIDDEN_MESSAGE = (
    "The text holds invisible characters (direction overrides, zero-width spaces) "
    "that would make it display as something else"
)


def validate_one_line(value):
    """The validator of a one-line name (model fields, forms, serializers alike)."""
    if isinstance(value, str) and has_control_characters(value):
        found = _named(value, lambda c: ord(c) < 32 or ord(c) == 127 or is_hidden(c))
        raise ValidationError(f"{ONE_LINE_MESSAGE} ({found}).", code="hidden_characters")


def validate_visible(value):
    """The validator of a text of several lines: line breaks are fine, invisible
    format characters are not."""
    if isinstance(value, str) and has_hidden_characters(value):
        found = _named(value, is_hidden)
        raise ValidationError(f"{HIDDEN_MESSAGE} ({found}).", code="hidden_characters")


def shown(text):
    """`text` with each invisible format character written out as [U+XXXX], for
    what the portal sends or shows of text it did not refuse (workload names
    from the cluster, older rows): a reader sees it is there."""
    if not has_hidden_characters(text):
        return text
    return "".join(f"[U+{ord(c):04X}]" if is_hidden(c) else c for c in text)


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
