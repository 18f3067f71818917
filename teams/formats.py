"""The one format of money and GPU-hours, for every page, the admin, emails and charts.

Template filters `money` and `hours` (gpu_requests/templatetags/portal.py) call
these; code that builds text itself (admin columns, chart titles) imports them.
"""

from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings


def money(value):
    """Two decimals and the currency: "1,234.50 USD" ("" for nothing)."""
    if value is None or value == "":
        return ""
    amount = Decimal(value).quantize(Decimal("0.01"), ROUND_HALF_UP)
    return f"{amount:,} {settings.PORTAL_CURRENCY}"


def gpu_hours(value):
    """Hours as a whole number when they are one (48, not 48.0), else one decimal."""
    if value is None or value == "":
        return ""
    return f"{value:,.0f}" if float(value).is_integer() else f"{float(value):,.1f}"


# Letters said with a vowel sound ("an H100", "an L4", "an A100"; "a T4").
_VOWEL_LETTERS = set("AEFHILMNORSX")


def with_article(name):
    """`name` after "a" or "an" as it is said: a model name that starts with a
    letter and a digit is read letter by letter ("an H100", "a T4"); a word by
    its first letter ("an Ampere", "a MIG slice")."""
    if not name:
        return name
    first = name.split()[0]
    if len(first) > 1 and first[0].isupper() and first[1].isdigit():
        vowel = first[0] in _VOWEL_LETTERS
    else:
        vowel = first[0].lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {name}"
