"""labelSelector and fieldSelector parsing and matching, as in apimachinery."""

import re

from .errors import BadRequest

_REQUIREMENT = re.compile(
    r"""\s*(?:
        (?P<not>!)\s*(?P<nkey>[^\s,!=()]+)                               # !key
      | (?P<skey>[^\s,!=()]+)\s*(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)  # key in (a,b)
      | (?P<key>[^\s,!=()]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^\s,!=()]*)       # key=value
      | (?P<ekey>[^\s,!=()]+)                                          # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


def parse_label_selector(text: str | None) -> list[tuple]:
    """Returns [(key, op, values)] with op in =, !=, in, notin, exists, !."""
    if not text:
        return []
    requirements = []
    pos = 0
    while pos < len(text):
        match = _REQUIREMENT.match(text, pos)
        if not match or match.end() == pos:
            raise BadRequest(f"unable to parse requirement: found '{text[pos:]}'")
        pos = match.end()
        if match["not"]:
            requirements.append((match["nkey"], "!", ()))
        elif match["setop"]:
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append((match["skey"], match["setop"], values))
        elif match["op"]:
            op = "!=" if match["op"] == "!=" else "="
            requirements.append((match["key"], op, (match["value"],)))
        else:
            requirements.append((match["ekey"], "exists", ()))
    return requirements


def labels_match(requirements: list[tuple], labels: dict | None) -> bool:
    labels = labels or {}
    for key, op, values in requirements:
        present = key in labels
        value = labels.get(key)
        if op == "=" and value != values[0]:
            return False
        if op == "!=" and value == values[0]:
            return False
        if op == "in" and (not present or value not in values):
            return False
        if op == "notin" and present and value in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
    return True


def selector_from_label_selector(selector: dict | None) -> list[tuple]:
    """A metav1.LabelSelector (matchLabels/matchExpressions) as requirements."""
    if not selector:
        return []
    requirements = [(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        requirements.append((expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return requirements


# Field selectors each kind supports beyond metadata.name / metadata.namespace.
FIELD_LABELS = {
    "pods": {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
    },
    "events": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "namespaces": {"status.phase"},
    "nodes": {"spec.unschedulable"},
    "jobs": {"status.successful"},
}


def parse_field_selector(resource: str, text: str | None, kind: str = "") -> list[tuple]:
    if not text:
        return []
    supported = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get(resource, set())
    requirements = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        match = re.fullmatch(r"([^!=]+?)\s*(==|!=|=)\s*(.*)", part)
        if not match:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = match.groups()
        if field not in supported:
            raise BadRequest(
                f"field label not supported: {field}"
                if not kind
                else f'"{field}" is not a known field selector: only "metadata.name", '
                f'"metadata.namespace"'
            )
        requirements.append((field, "!=" if op == "!=" else "=", value))
    return requirements


def _field_value(obj: dict, field: str) -> str:
    if field == "source":
        return (obj.get("source") or {}).get("component", "")
    value = obj
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_match(requirements: list[tuple], obj: dict) -> bool:
    for field, op, value in requirements:
        actual = _field_value(obj, field)
        if (actual == value) != (op == "="):
            return False
    return True
