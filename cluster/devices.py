"""DRA device selectors: the small subset of CEL the portal reads itself.

Kubernetes evaluates a DeviceClass's and a claim's CEL selectors with the full
language. The portal needs the same answer in two places without a CEL engine:
the catalog (is a flavor's selector one the portal can count?) and the cluster
inventory (which devices of a ResourceSlice does a flavor get?). It reads a
conjunction (`&&`, parentheses allowed) of these terms, and refuses anything
else with a message saying what it reads:

- `device.driver == "gpu.nvidia.com"` (or `!=`)
- `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`:
  `==` or `!=` against a string, an integer or `true`/`false`
- `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`:
  any of `<`, `<=`, `==`, `!=`, `>=`, `>` against 0

Strings may be single- or double-quoted (NVIDIA's DeviceClasses use single
quotes). Refused: `||`, `!`, `in`, version attributes' `semver(...)`
comparisons, `matches`, `has`, macros, arithmetic. A device that lacks an
attribute or capacity a term names does not match (Kubernetes makes that a CEL
runtime error and allocates nothing from the claim; either way the device is
not the flavor's). Pure functions, no Django.
"""

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

DRA_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"

SUBSET = (
    'the portal reads a conjunction (&&) of: device.driver == "..."; '
    'device.attributes["domain"].name == (or !=) a string, integer or true/false; '
    'device.capacity["domain"].name.compareTo(quantity("40Gi")) >= 0 (any of < <= == != >= >)'
)


class SelectorError(ValueError):
    """A selector outside the subset above, or not well-formed."""


def quota_resource(device_class):
    """The ResourceQuota key that counts a DeviceClass's devices (no `requests.`:
    Kubernetes accepts that spelling and never enforces it)."""
    return f"{device_class}{DRA_QUOTA_SUFFIX}"


def is_dra_quota_resource(name):
    return name.endswith(DRA_QUOTA_SUFFIX)


# --- quantities ---

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1}
_DECIMAL |= {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


def parse_quantity(text):
    """A Kubernetes quantity ("80Gi", "500m", "1e3") as a Decimal; SelectorError if it is none."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise SelectorError(f"{text!r} is not a Kubernetes quantity")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number + (exponent or ""))
    except InvalidOperation:
        raise SelectorError(f"{text!r} is not a Kubernetes quantity") from None
    suffix = suffix or ""
    return value * (_BINARY.get(suffix) or _DECIMAL[suffix])


# --- parsing ---

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<number>-?\d+)
    | (?P<op>&&|\|\||==|!=|>=|<=|[<>()\[\].!,])
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_COMPARISONS = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Term:
    """One comparison: `kind` is driver, attribute or capacity."""

    kind: str
    domain: str
    name: str
    op: str
    value: object  # str | int | bool for driver and attributes; Decimal for capacity


def _tokens(expression):
    tokens, position = [], 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise SelectorError(f"cannot read {text[position : position + 20]!r}; {SUBSET}")
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "string":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, expression):
        self.tokens = _tokens(expression)
        self.position = 0

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else (None, None)

    def take(self, kind=None, value=None):
        token = self.peek()
        if token[0] is None or (kind and token[0] != kind) or (value and token[1] != value):
            wanted = value or kind or "more"
            found = token[1] if token[0] else "the end"
            raise SelectorError(f"expected {wanted!r}, found {found!r}; {SUBSET}")
        self.position += 1
        return token[1]

    def conjunction(self):
        terms = self.term()
        while self.peek() == ("op", "&&"):
            self.take()
            terms += self.term()
        return terms

    def term(self):
        if self.peek() == ("op", "("):
            self.take()
            terms = self.conjunction()
            self.take("op", ")")
            return terms
        self.take("name", "device")
        self.take("op", ".")
        field = self.take("name")
        if field == "driver":
            op = self.take("op")
            if op not in ("==", "!="):
                raise SelectorError(f"device.driver takes == or !=, not {op}; {SUBSET}")
            return [Term("driver", "", "", op, self.take("string"))]
        if field not in ("attributes", "capacity"):
            raise SelectorError(f"device.{field} is not read by the portal; {SUBSET}")
        self.take("op", "[")
        domain = self.take("string")
        self.take("op", "]")
        self.take("op", ".")
        name = self.take("name")
        if field == "attributes":
            op = self.take("op")
            if op not in ("==", "!="):
                raise SelectorError(f"attributes are compared with == or !=, not {op}; {SUBSET}")
            return [Term("attribute", domain, name, op, self.literal())]
        self.take("op", ".")
        self.take("name", "compareTo")
        self.take("op", "(")
        self.take("name", "quantity")
        self.take("op", "(")
        bound = parse_quantity(self.take("string"))
        self.take("op", ")")
        self.take("op", ")")
        op = self.take("op")
        if op not in _COMPARISONS:
            raise SelectorError(f"compareTo(...) is compared with 0 by {op}?; {SUBSET}")
        if self.take("number") != "0":
            raise SelectorError(f"compareTo(...) is compared with 0; {SUBSET}")
        return [Term("capacity", domain, name, op, bound)]

    def literal(self):
        kind, value = self.peek()
        if kind == "string":
            return self.take()
        if kind == "number":
            return int(self.take())
        if kind == "name" and value in ("true", "false"):
            return self.take() == "true"
        found = repr(value) if kind else "the end"
        raise SelectorError(f"expected a string, an integer or true/false, found {found}; {SUBSET}")


def parse_selector(expression):
    """[Term] for a selector (empty for an empty one); SelectorError outside the subset."""
    if not (expression or "").strip():
        return []
    parser = _Parser(expression)
    terms = parser.conjunction()
    if parser.position != len(parser.tokens):
        raise SelectorError(f"cannot read {parser.peek()[1]!r} here; {SUBSET}")
    return terms


# --- evaluation against a ResourceSlice's device ---


def _attribute(device, driver, domain, name):
    attributes = device.get("attributes") or {}
    value = attributes.get(f"{domain}/{name}")
    if value is None and domain == driver:
        value = attributes.get(name)  # unqualified names are in the driver's domain
    if not value:
        return None
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    return None  # a version: the subset does not compare versions


def _capacity(device, driver, domain, name):
    capacity = device.get("capacity") or {}
    value = capacity.get(f"{domain}/{name}")
    if value is None and domain == driver:
        value = capacity.get(name)
    if not value or "value" not in value:
        return None
    return parse_quantity(value["value"])


def term_matches(term, device, driver):
    if term.kind == "driver":
        return _COMPARISONS[term.op](driver, term.value)
    if term.kind == "attribute":
        found = _attribute(device, driver, term.domain, term.name)
        if found is None or type(found) is not type(term.value):
            return False
        return _COMPARISONS[term.op](found, term.value)
    found = _capacity(device, driver, term.domain, term.name)
    return found is not None and _COMPARISONS[term.op](found, term.value)


def device_matches(terms, device, driver):
    """True if `device` (a ResourceSlice `spec.devices[]` entry) of `driver` meets every term."""
    return all(term_matches(term, device, driver) for term in terms)
