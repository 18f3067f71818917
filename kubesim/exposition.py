"""Prometheus exposition: metric families, label sets and number formats (pure).

The live endpoints (`/metrics`, `/metrics/dcgm/{node}`, `/metrics/kube-state-metrics`)
and the history generator both turn `(family, labels, value)` rows into text here,
so a scrape and a backfilled block hold the same series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # gauge | counter
    help: str


def sanitize(name: str) -> str:
    """A Kubernetes name as kube-state-metrics turns it into a label name or value
    (`nvidia.com/mig-1g.10gb` -> `nvidia_com_mig_1g_10gb`)."""
    return _INVALID_LABEL_CHARS.sub("_", name)


def escape(value) -> str:
    value = str(value)
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def series_key(name: str, labels) -> str:
    """`name{a="x",b="y"}` for an ordered sequence of (label, value) pairs."""
    if not labels:
        return name
    return name + "{" + ",".join([f'{key}="{escape(value)}"' for key, value in labels]) + "}"


def scraped(labels, target: dict, honor_labels: bool) -> list[tuple]:
    """The labels Prometheus stores for a scraped series: the target's labels added;
    on a clash the scraped label wins with honor_labels, else it is kept as
    `exported_<name>` (Prometheus' rule)."""
    if honor_labels:
        names = {name for name, _ in labels}
        return list(labels) + [(k, v) for k, v in target.items() if k not in names]
    result = [(f"exported_{k}" if k in target else k, v) for k, v in labels]
    return result + list(target.items())


def go_float(value: float) -> str:
    """A float as Go's strconv.FormatFloat(v, 'g', -1, 64) prints it, which is how
    kube-state-metrics writes values: 1, 0.5, 81920, 1.7e+09."""
    value = float(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digits))
    exp10 = len(digits) + exponent - 1
    prefix = "-" if sign else ""
    # Go switches to %e at exponent 6 when printing the shortest representation.
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exp10 < 0:
        return f"{prefix}0.{'0' * (-exp10 - 1)}{digits}"
    if len(digits) <= exp10 + 1:
        return prefix + digits + "0" * (exp10 + 1 - len(digits))
    return f"{prefix}{digits[: exp10 + 1]}.{digits[exp10 + 1 :]}"


def render(families: list[Family], rows: dict[str, list[tuple]]) -> str:
    """Text format 0.0.4: `# HELP`, `# TYPE`, then `name{labels} value` per row.

    `rows` maps a family name to [(labels, formatted value)]; families without rows
    still print their header, as client_golang and kube-state-metrics do."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {family.help}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in rows.get(family.name, ()):
            lines.append(f"{series_key(family.name, labels)} {value}")
    return "\n".join(lines) + "\n"
