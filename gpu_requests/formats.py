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
