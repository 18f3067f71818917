"""What the apiserver refuses with 422 Invalid (or 400 for strict decoding).

Structure and types come from kubernetes-validate's JSON schemas (one cached
validator per kind, ~0.2 ms a call); the semantic rules the schemas cannot
express (names, required fields, enums, immutability) are written out here, and
each kind's strategy (strategies.py) picks the ones that apply to it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING

from kubesim import quantity

from .errors import BadRequest, FieldError, Invalid, TypedPatchError
from .quota import is_extended
from .selectors import labels_match, selector_from_label_selector

# resources.py imports the strategies, which import this module: here ResourceType is
# only an annotation.
if TYPE_CHECKING:
    from .resources import ResourceType

SCHEMA_VERSION = "v1.37.0"

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
QUANTITY_MSG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


# --- structural checks against the OpenAPI-derived JSON schemas ---


@functools.cache
def _validator(kind: str, api_version: str, strict: bool):
    try:
        import importlib_resources
        import jsonschema
        import kubernetes_validate  # noqa: F401 - only its schema files are used
    except ImportError:
        return None  # a dev dependency: without it only the semantic rules run

    folder = f"{SCHEMA_VERSION}-local" + ("-strict" if strict else "")
    root = importlib_resources.files("kubernetes_validate") / "kubernetes-json-schema" / folder
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = json.loads((root / f"{kind.lower()}-{group}.json").read_text())
    definitions = json.loads((root / "_definitions.json").read_text())["$defs"]
    # $refs inlined once: resolving them per call through `referencing` cost ~4x more.
    return jsonschema.validators.Draft202012Validator(_inline(schema, definitions, {}))


def _inline(node, definitions: dict, done: dict):
    if isinstance(node, list):
        return [_inline(item, definitions, done) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and "#/$defs/" in ref:
        name = ref.split("#/$defs/", 1)[1]
        if name not in done:
            done[name] = {}  # placeholder; core types are not recursive
            done[name].update(_inline(definitions[name], definitions, done))
        return done[name]
    return {k: _inline(v, definitions, done) for k, v in node.items() if k != "$schema"}


def _dotted(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else ("." if text else "") + str(part)
    return text


def unknown_fields(rtype: ResourceType, obj: dict) -> list[str]:
    """The dotted paths of fields the kind's schema does not have."""
    validator = _validator(rtype.kind, rtype.api_version, True)
    if validator is None:
        return []
    return sorted(
        path
        for error in validator.iter_errors(obj)
        if error.validator == "additionalProperties"
        for path in _extra_paths(error)
    )


def _extra_paths(error) -> list[str]:
    path = _dotted(error.absolute_path)
    extra = re.findall(r"'([^']+)' was unexpected", error.message)
    return [f"{path}.{e}" if path else e for e in extra]


def check_apply_config(rtype: ResourceType, config: dict) -> None:
    """A server-side apply configuration with a field the schema lacks is refused as
    the apiserver's structured-merge-diff refuses it: a 500, not a 400."""
    unknown = unknown_fields(rtype, config)
    if unknown:
        meta = config.get("metadata") or {}
        group_version = rtype.api_version if "/" in rtype.api_version else f"/{rtype.api_version}"
        raise TypedPatchError(
            f"failed to create typed patch object ({meta.get('namespace', '')}/"
            f"{meta.get('name', '')}; {group_version}, Kind={rtype.kind}): .{unknown[0]}: "
            "field not declared in schema"
        )


def check_structure(rtype: ResourceType, obj: dict, *, strict: bool = False) -> None:
    """422 for values of the wrong type; with strict field validation (what kubectl asks
    for) also 400 for unknown fields, like the real strict decoder."""
    name = (obj.get("metadata") or {}).get("name", "")
    errors = []
    validator = _validator(rtype.kind, rtype.api_version, strict)
    if validator is None:
        return
    unknown = []
    for error in validator.iter_errors(obj):
        path = _dotted(error.absolute_path)
        if error.validator == "additionalProperties":
            unknown += _extra_paths(error)
            continue
        if error.validator == "type":
            wanted = error.validator_value
            wanted = [t for t in wanted if t != "null"] if isinstance(wanted, list) else [wanted]
            detail = f"{path} in body must be of type {' or '.join(wanted)}: {_go(error.instance)}"
            errors.append(FieldError("TypeInvalid", path, error.instance, detail))
        elif error.validator == "required":
            missing = re.findall(r"'([^']+)' is a required property", error.message)
            for field in missing:
                errors.append(FieldError("Required", f"{path}.{field}" if path else field))
        elif error.validator == "enum":
            supported = ", ".join(_go(v) for v in error.validator_value if v is not None)
            errors.append(
                FieldError("NotSupported", path, error.instance, f"supported values: {supported}")
            )
        else:
            errors.append(FieldError("Invalid", path, error.instance, error.message))
    if unknown:
        fields = ", ".join(f'unknown field "{u}"' for u in sorted(unknown))
        version = rtype.api_version.rpartition("/")[2]
        raise BadRequest(
            f'{rtype.kind} in version "{version}" cannot be handled as a {rtype.kind}: '
            f"strict decoding error: {fields}"
        )
    if errors:
        raise Invalid(kind=rtype.kind, group=rtype.group, name=name, errors=errors)


def _go(value) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


# --- semantic rules ---


def label_name_errors(name: str) -> list[FieldError]:
    """A name that must be a DNS label (a namespace's)."""
    if not DNS1123_LABEL.match(name) or len(name) > 63:
        detail = LABEL_MSG if len(name) <= 63 else "must be no more than 63 characters"
        return [FieldError("Invalid", "metadata.name", name, detail)]
    return []


def path_segment_name_errors(name: str) -> list[FieldError]:
    """A name that only has to be a valid path segment (RBAC's)."""
    if name in (".", "..") or "/" in name or "%" in name:
        return [FieldError("Invalid", "metadata.name", name, "may not contain '/' or '%'")]
    return []


def subdomain_name_errors(name: str) -> list[FieldError]:
    """A name that must be a DNS subdomain (most kinds')."""
    if len(name) > 253:
        return [FieldError("Invalid", "metadata.name", name, "must be no more than 253 characters")]
    if not DNS1123_SUBDOMAIN.match(name):
        return [FieldError("Invalid", "metadata.name", name, SUBDOMAIN_MSG)]
    return []


def _qualified_name_errors(field: str, key: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if prefix and (not DNS1123_SUBDOMAIN.match(prefix) or len(prefix) > 253):
        errors.append(FieldError("Invalid", field, key, "prefix part " + SUBDOMAIN_MSG))
    if not name or len(name) > 63 or not QUALIFIED_NAME.match(name):
        errors.append(FieldError("Invalid", field, key, QUALIFIED_MSG))
    return errors


def _metadata_errors(name_errors, meta: dict) -> list[FieldError]:
    errors = []
    name = meta.get("name") or ""
    if not name:
        errors.append(
            FieldError("Required", "metadata.name", None, "name or generateName is required")
        )
    else:
        errors += name_errors(name)
    for key, value in (meta.get("labels") or {}).items():
        errors += _qualified_name_errors("metadata.labels", key)
        if not isinstance(value, str) or (
            value and (len(value) > 63 or not QUALIFIED_NAME.match(value))
        ):
            errors.append(FieldError("Invalid", "metadata.labels", value, LABEL_VALUE_MSG))
    for key in meta.get("annotations") or {}:
        errors += _qualified_name_errors("metadata.annotations", key)
    return errors


def _quantity_errors(field: str, mapping, *, container: bool = False) -> list[FieldError]:
    """Malformed quantities; in a container's resources also fractions of an extended
    resource (`nvidia.com/gpu: 500m`), which the apiserver refuses: devices are whole."""
    errors = []
    for key, value in (mapping or {}).items():
        try:
            parsed = quantity.parse(value)
        except (ValueError, TypeError):
            errors.append(FieldError("Invalid", f"{field}[{key}]", value, QUANTITY_MSG))
            continue
        if container and is_extended(key) and parsed.denominator != 1:
            shown = quantity.format_decimal(parsed)
            errors.append(FieldError("Invalid", f"{field}[{key}]", shown, "must be an integer"))
    return errors


def _same_quantity(a, b) -> bool:
    try:
        return quantity.parse(a) == quantity.parse(b)
    except (ValueError, TypeError):
        return False  # already reported as an invalid quantity


def _container_errors(field: str, containers, names: set) -> list[FieldError]:
    errors = []
    for index, container in enumerate(containers or []):
        path = f"{field}[{index}]"
        if not isinstance(container, dict):
            continue
        name = container.get("name")
        if not name:
            errors.append(FieldError("Required", f"{path}.name"))
        elif not DNS1123_LABEL.match(name) or len(name) > 63:
            errors.append(FieldError("Invalid", f"{path}.name", name, LABEL_MSG))
        elif name in names:
            errors.append(FieldError("Duplicate", f"{path}.name", name))
        names.add(name)
        if not container.get("image"):
            errors.append(FieldError("Required", f"{path}.image"))
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        errors += _quantity_errors(f"{path}.resources.limits", limits, container=True)
        errors += _quantity_errors(f"{path}.resources.requests", requests, container=True)
        for resource_name, requested in requests.items():
            if not is_extended(resource_name):
                continue
            limit = limits.get(resource_name)
            if limit is None:
                errors.append(
                    FieldError(
                        "Forbidden",
                        f"{path}.resources.limits",
                        None,
                        "Limit must be set for non overcommitable resources",
                    )
                )
            elif not _same_quantity(limit, requested):
                errors.append(
                    FieldError(
                        "Invalid",
                        f"{path}.resources.requests",
                        str(requested),
                        f"must be equal to {resource_name} limit of {limit}",
                    )
                )
    return errors


def _pod_spec_errors(field: str, spec, *, job: bool = False) -> list[FieldError]:
    if not isinstance(spec, dict):
        return [FieldError("Required", field)]
    errors = []
    if not spec.get("containers"):
        errors.append(FieldError("Required", f"{field}.containers"))
    names: set = set()
    errors += _container_errors(f"{field}.containers", spec.get("containers"), names)
    errors += _container_errors(f"{field}.initContainers", spec.get("initContainers"), names)
    policy = spec.get("restartPolicy")
    allowed = ["OnFailure", "Never"] if job else ["Always", "OnFailure", "Never"]
    supported = ", ".join(f'"{v}"' for v in allowed)
    if job and policy is None:
        errors.append(
            FieldError("Required", f"{field}.restartPolicy", None, f"valid values: {supported}")
        )
    elif policy is not None and policy not in allowed:
        errors.append(
            FieldError(
                "NotSupported", f"{field}.restartPolicy", policy, f"supported values: {supported}"
            )
        )
    return errors


def pod_errors(obj: dict) -> list[FieldError]:
    return _pod_spec_errors("spec", obj.get("spec"))


def job_errors(obj: dict) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not spec.get("template"):
        return [FieldError("Required", "spec.template")]
    errors = _pod_spec_errors("spec.template.spec", spec["template"].get("spec"), job=True)
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(key)
        if isinstance(value, int) and value < (1 if key == "activeDeadlineSeconds" else 0):
            detail = "must be greater than or equal to " + (
                "1" if key == "activeDeadlineSeconds" else "0"
            )
            errors.append(FieldError("Invalid", f"spec.{key}", value, detail))
    return errors


def workload_errors(obj: dict) -> list[FieldError]:
    """ValidateDeploymentSpec / ValidateReplicaSetSpec / ValidateStatefulSetSpec: a
    selector that picks the template's own labels, replicas not negative."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not spec.get("template"):
        return [FieldError("Required", "spec.template")]
    errors = _pod_spec_errors("spec.template.spec", spec["template"].get("spec"))
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        detail = "must be greater than or equal to 0"
        errors.append(FieldError("Invalid", "spec.replicas", replicas, detail))
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        return errors + [FieldError("Required", "spec.selector")]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        detail = f"empty selector is invalid for {obj.get('kind', '').lower()}"
        return errors + [FieldError("Invalid", "spec.selector", selector, detail)]
    labels = (spec["template"].get("metadata") or {}).get("labels") or {}
    if not labels_match(selector_from_label_selector(selector), labels):
        detail = "`selector` does not match template `labels`"
        errors.append(FieldError("Invalid", "spec.template.metadata.labels", labels, detail))
    return errors


def role_errors(obj: dict) -> list[FieldError]:
    errors = []
    for index, rule in enumerate(obj.get("rules") or []):
        if not (rule or {}).get("verbs"):
            errors.append(
                FieldError(
                    "Required",
                    f"rules[{index}].verbs",
                    None,
                    "verbs must contain at least one value",
                )
            )
    return errors


def role_binding_errors(obj: dict) -> list[FieldError]:
    errors = []
    ref = obj.get("roleRef")
    if not isinstance(ref, dict):
        return [FieldError("Required", "roleRef")]
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        errors.append(
            FieldError(
                "NotSupported",
                "roleRef.apiGroup",
                ref.get("apiGroup", ""),
                'supported values: "rbac.authorization.k8s.io"',
            )
        )
    kinds = ("ClusterRole",) if obj.get("kind") == "ClusterRoleBinding" else ("Role", "ClusterRole")
    if ref.get("kind") not in kinds:
        errors.append(
            FieldError(
                "NotSupported",
                "roleRef.kind",
                ref.get("kind", ""),
                "supported values: " + ", ".join(f'"{k}"' for k in kinds),
            )
        )
    if not ref.get("name"):
        errors.append(FieldError("Required", "roleRef.name"))
    for index, subject in enumerate(obj.get("subjects") or []):
        if not subject.get("name"):
            errors.append(FieldError("Required", f"subjects[{index}].name"))
        if subject.get("kind") not in ("User", "Group", "ServiceAccount"):
            errors.append(
                FieldError(
                    "NotSupported",
                    f"subjects[{index}].kind",
                    subject.get("kind", ""),
                    'supported values: "ServiceAccount", "User", "Group"',
                )
            )
    return errors


def quota_errors(obj: dict) -> list[FieldError]:
    return _quantity_errors("spec.hard", (obj.get("spec") or {}).get("hard"))


def limit_range_errors(obj: dict) -> list[FieldError]:
    errors = []
    for index, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        if not item.get("type"):
            errors.append(FieldError("Required", f"spec.limits[{index}].type"))
        for key in ("max", "min", "default", "defaultRequest"):
            errors += _quantity_errors(f"spec.limits[{index}].{key}", item.get(key))
    return errors


def event_errors(obj: dict) -> list[FieldError]:
    involved = obj.get("involvedObject") or {}
    errors = []
    meta_ns = (obj.get("metadata") or {}).get("namespace")
    if involved.get("namespace") and meta_ns and involved["namespace"] != meta_ns:
        errors.append(
            FieldError(
                "Invalid",
                "involvedObject.namespace",
                involved["namespace"],
                "does not match event.namespace",
            )
        )
    return errors


# Pod fields a kubelet-less update may change (what ValidatePodUpdate allows).
MUTABLE_POD_SPEC = {
    "activeDeadlineSeconds",
    "tolerations",
    "terminationGracePeriodSeconds",
    "schedulingGates",
}


def job_update_errors(new: dict, old: dict) -> list[FieldError]:
    errors = []
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    for key in ("selector", "completions", "completionMode", "podFailurePolicy"):
        if new_spec.get(key) != old_spec.get(key):
            errors.append(
                FieldError("Invalid", f"spec.{key}", new_spec.get(key), "field is immutable")
            )
    new_template, old_template = new_spec.get("template"), old_spec.get("template")
    # Only a suspended Job that never started may change its scheduling directives
    # (the job strategy's AllowMutableSchedulingDirectives).
    never_started = not (old.get("status") or {}).get("startTime")
    if new_template != old_template and not _scheduling_only_change(
        new_template, old_template, suspended=bool(old_spec.get("suspend")) and never_started
    ):
        errors.append(FieldError("Invalid", "spec.template", new_template, "field is immutable"))
    return errors


def workload_update_errors(new: dict, old: dict) -> list[FieldError]:
    new_selector = (new.get("spec") or {}).get("selector")
    if new_selector != (old.get("spec") or {}).get("selector"):
        return [FieldError("Invalid", "spec.selector", new_selector, "field is immutable")]
    return []


def role_binding_update_errors(new: dict, old: dict) -> list[FieldError]:
    if new.get("roleRef") != old.get("roleRef"):
        return [FieldError("Invalid", "roleRef", new.get("roleRef"), "cannot change roleRef")]
    return []


def pod_update_errors(new: dict, old: dict) -> list[FieldError]:
    errors = []
    old_gates = {g.get("name") for g in (old.get("spec") or {}).get("schedulingGates") or []}
    for index, gate in enumerate((new.get("spec") or {}).get("schedulingGates") or []):
        if gate.get("name") not in old_gates:
            errors.append(
                FieldError(
                    "Forbidden",
                    f"spec.schedulingGates[{index}]",
                    None,
                    f"only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
                )
            )
    new_spec = _pod_spec_for_compare(new.get("spec") or {}, old.get("spec") or {})
    old_spec = _pod_spec_for_compare(old.get("spec") or {}, old.get("spec") or {})
    if new_spec != old_spec:
        errors.append(
            FieldError(
                "Forbidden",
                "spec",
                None,
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),"
                "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)",
            )
        )
    return errors


def _pod_spec_for_compare(spec: dict, old_spec: dict) -> dict:
    spec = {k: v for k, v in spec.items() if k not in MUTABLE_POD_SPEC}
    # Binding a pod to a node (the scheduler's job) sets nodeName once.
    if not old_spec.get("nodeName"):
        spec.pop("nodeName", None)
    for key in ("containers", "initContainers"):
        spec[key] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(key) or []]
    return spec


def _scheduling_only_change(new, old, *, suspended: bool) -> bool:
    """A change of the template's scheduling directives (nodeSelector, tolerations,
    affinity, schedulingGates) and of its labels and annotations, allowed while
    `suspended`; any other template change is never allowed."""
    if not suspended or not isinstance(new, dict) or not isinstance(old, dict):
        return False
    free = {"nodeSelector", "tolerations", "affinity", "schedulingGates"}
    new_spec = {k: v for k, v in (new.get("spec") or {}).items() if k not in free}
    old_spec = {k: v for k, v in (old.get("spec") or {}).items() if k not in free}
    new_meta = {k: v for k, v in (new.get("metadata") or {}).items() if k not in _LABELS}
    old_meta = {k: v for k, v in (old.get("metadata") or {}).items() if k not in _LABELS}
    return new_spec == old_spec and new_meta == old_meta


_LABELS = {"labels", "annotations"}


def validate(rtype: ResourceType, obj: dict, old: dict | None = None) -> None:
    """Semantic validation of a defaulted object by its kind's strategy (Validate, and
    ValidateUpdate when there is an `old`); raises Invalid with all errors."""
    strategy = rtype.strategy
    errors = _metadata_errors(strategy.name_errors, obj.get("metadata") or {})
    errors += strategy.validate(obj)
    if old is not None:
        errors += strategy.validate_update(obj, old)
    if errors:
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid(kind=rtype.kind, group=rtype.group, name=name, errors=errors)
