"""Kubernetes resource quantities ("500m", "4Gi", "1", "2e3") as exact fractions.

Values are `Fraction`s so that sums like 3 x "100m" compare exactly against "300m"
(floats would not), which matters for quota admission at the boundary.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse(value: str | int | float | Fraction) -> Fraction:
    """Parse a quantity; raises ValueError on anything the apiserver would reject."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int | float):
        return Fraction(str(value))
    match = _PATTERN.match(str(value).strip())
    if not match or match.group(1) in (".", "+.", "-.", ""):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    number, exponent, suffix = match.groups()
    base = Fraction(number)
    if exponent:
        return base * Fraction(10) ** int(exponent[1:])
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix or ""]


def is_valid(value) -> bool:
    try:
        parse(value)
    except (ValueError, TypeError):
        return False
    return True


def format_decimal(value: Fraction) -> str:
    """Canonical DecimalSI form as the apiserver prints it: 1500m, 2, 2k, 1500."""
    if value == 0:
        return "0"
    # Largest SI exponent with an integer mantissa, as resource.Quantity.String() picks.
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        mantissa = value / _DECIMAL[suffix]
        if mantissa.denominator == 1:
            return f"{mantissa.numerator}{suffix}"
    # Sub-nano precision rounds up like the apiserver does.
    nanos = -((-value * 10**9) // 1)
    return f"{nanos}n"


def format_binary(value: Fraction) -> str:
    """Canonical BinarySI form (4Gi, 512Mi); falls back to decimal when not a 1024 multiple."""
    if value == 0:
        return "0"
    if value.denominator == 1:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if value.numerator % _BINARY[suffix] == 0:
                return f"{value.numerator // _BINARY[suffix]}{suffix}"
        if value.numerator < 1024:
            return str(value.numerator)
    return format_decimal(value)


def format_for(resource: str, value: Fraction) -> str:
    """Format a sum for a resource name: byte-sized resources print in binary units."""
    if "memory" in resource or "storage" in resource or resource.startswith("hugepages-"):
        return format_binary(value)
    return format_decimal(value)
