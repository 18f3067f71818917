"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to
the JSON form the rest of kubesim works with.

client-go's typed clients (kubectl create namespace/job/quota/role/rolebinding, kubectl
drain's Eviction) send `k8s\\x00` followed by a `runtime.Unknown` whose `raw` is the
object's own message. Field numbers are those of the upstream `generated.proto` files
(k8s.io/api core/v1, batch/v1, rbac/v1, policy/v1; apimachinery meta/v1, runtime,
resource, intstr). Go writes every non-pointer field even when empty, so a zero value
of a non-pointer field is dropped (as `omitempty` drops it from JSON) and a field this
table does not know is ignored when it is empty and refused (415) when it is not:
nothing a client sent is silently lost.

A field is `number: (json name, type)`; a type is a message name from MESSAGES or one
of the scalars below, with `[]` in front for a repeated field and `?` after for a Go
pointer (whose zero value is kept: `backoffLimit: 0`, `suspend: false`).
"""

import json
from datetime import UTC, datetime

from .errors import ApiError, BadRequest

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
SCALARS = {"string", "bytes", "int", "bool", "time", "quantity", "intstr", "rawjson"}
SKIP = "skip"  # a message the apiserver ignores on writes (status): not decoded

SELECTOR_REQUIREMENT = {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", "[]string")}
MESSAGES: dict[str, dict[int, tuple[str, str]]] = {
    # k8s.io/apimachinery/pkg/runtime
    "Unknown": {
        1: ("typeMeta", "TypeMeta"),
        2: ("raw", "bytes"),
        3: ("contentEncoding", "string"),
        4: ("contentType", "string"),
    },
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    # k8s.io/apimachinery/pkg/apis/meta/v1
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        4: ("selfLink", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        8: ("creationTimestamp", "time"),
        9: ("deletionTimestamp", "time"),
        10: ("deletionGracePeriodSeconds", "int?"),
        11: ("labels", "map:string"),
        12: ("annotations", "map:string"),
        13: ("ownerReferences", "[]OwnerReference"),
        14: ("finalizers", "[]string"),
    },
    "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool?"),
        7: ("blockOwnerDeletion", "bool?"),
    },
    "LabelSelector": {
        1: ("matchLabels", "map:string"),
        2: ("matchExpressions", "[]LabelSelectorRequirement"),
    },
    "LabelSelectorRequirement": SELECTOR_REQUIREMENT,
    "DeleteOptions": {
        1: ("gracePeriodSeconds", "int?"),
        2: ("preconditions", "Preconditions"),
        3: ("orphanDependents", "bool?"),
        4: ("propagationPolicy", "string?"),
        5: ("dryRun", "[]string"),
        6: ("ignoreStoreReadErrorWithClusterBreakingPotential", "bool?"),
    },
    "Preconditions": {1: ("uid", "string?"), 2: ("resourceVersion", "string?")},
    # k8s.io/api/core/v1
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec"), 3: ("status", SKIP)},
    "NamespaceSpec": {1: ("finalizers", "[]string")},
    "Pod": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec"), 3: ("status", SKIP)},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "PodSpec": {
        2: ("containers", "[]Container"),
        3: ("restartPolicy", "string"),
        4: ("terminationGracePeriodSeconds", "int?"),
        5: ("activeDeadlineSeconds", "int?"),
        6: ("dnsPolicy", "string"),
        7: ("nodeSelector", "map:string"),
        8: ("serviceAccountName", "string"),
        9: ("serviceAccount", "string"),
        10: ("nodeName", "string"),
        11: ("hostNetwork", "bool"),
        12: ("hostPID", "bool"),
        13: ("hostIPC", "bool"),
        14: ("securityContext", "PodSecurityContext"),
        15: ("imagePullSecrets", "[]LocalObjectReference"),
        16: ("hostname", "string"),
        17: ("subdomain", "string"),
        18: ("affinity", "Affinity"),
        19: ("schedulerName", "string"),
        20: ("initContainers", "[]Container"),
        21: ("automountServiceAccountToken", "bool?"),
        22: ("tolerations", "[]Toleration"),
        24: ("priorityClassName", "string"),
        25: ("priority", "int?"),
        29: ("runtimeClassName", "string?"),
        30: ("enableServiceLinks", "bool?"),
        31: ("preemptionPolicy", "string?"),
        35: ("setHostnameAsFQDN", "bool?"),
        37: ("hostUsers", "bool?"),
        38: ("schedulingGates", "[]PodSchedulingGate"),
    },
    "PodSecurityContext": {
        2: ("runAsUser", "int?"),
        3: ("runAsNonRoot", "bool?"),
        4: ("supplementalGroups", "[]int"),
        5: ("fsGroup", "int?"),
        6: ("runAsGroup", "int?"),
    },
    "LocalObjectReference": {1: ("name", "string")},
    "PodSchedulingGate": {1: ("name", "string")},
    "Toleration": {
        1: ("key", "string"),
        2: ("operator", "string"),
        3: ("value", "string"),
        4: ("effect", "string"),
        5: ("tolerationSeconds", "int?"),
    },
    "Affinity": {1: ("nodeAffinity", "NodeAffinity")},
    "NodeAffinity": {
        1: ("requiredDuringSchedulingIgnoredDuringExecution", "NodeSelector"),
        2: ("preferredDuringSchedulingIgnoredDuringExecution", "[]PreferredSchedulingTerm"),
    },
    "NodeSelector": {1: ("nodeSelectorTerms", "[]NodeSelectorTerm")},
    "NodeSelectorTerm": {
        1: ("matchExpressions", "[]NodeSelectorRequirement"),
        2: ("matchFields", "[]NodeSelectorRequirement"),
    },
    "NodeSelectorRequirement": SELECTOR_REQUIREMENT,
    "PreferredSchedulingTerm": {1: ("weight", "int"), 2: ("preference", "NodeSelectorTerm")},
    "Container": {
        1: ("name", "string"),
        2: ("image", "string"),
        3: ("command", "[]string"),
        4: ("args", "[]string"),
        5: ("workingDir", "string"),
        6: ("ports", "[]ContainerPort"),
        7: ("env", "[]EnvVar"),
        8: ("resources", "ResourceRequirements"),
        9: ("volumeMounts", "[]VolumeMount"),
        13: ("terminationMessagePath", "string"),
        14: ("imagePullPolicy", "string"),
        16: ("stdin", "bool"),
        17: ("stdinOnce", "bool"),
        18: ("tty", "bool"),
        20: ("terminationMessagePolicy", "string"),
        24: ("restartPolicy", "string?"),
    },
    "ContainerPort": {
        1: ("name", "string"),
        2: ("hostPort", "int"),
        3: ("containerPort", "int"),
        4: ("protocol", "string"),
        5: ("hostIP", "string"),
    },
    "EnvVar": {1: ("name", "string"), 2: ("value", "string")},
    "VolumeMount": {
        1: ("name", "string"),
        2: ("readOnly", "bool"),
        3: ("mountPath", "string"),
        4: ("subPath", "string"),
        5: ("mountPropagation", "string?"),
        6: ("subPathExpr", "string"),
    },
    "ResourceRequirements": {1: ("limits", "map:quantity"), 2: ("requests", "map:quantity")},
    "ResourceQuota": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "ResourceQuotaSpec"),
        3: ("status", SKIP),
    },
    "ResourceQuotaSpec": {
        1: ("hard", "map:quantity"),
        2: ("scopes", "[]string"),
        3: ("scopeSelector", "ScopeSelector"),
    },
    "ScopeSelector": {1: ("matchExpressions", "[]ScopedResourceSelectorRequirement")},
    "ScopedResourceSelectorRequirement": {
        1: ("scopeName", "string"),
        2: ("operator", "string"),
        3: ("values", "[]string"),
    },
    "LimitRange": {1: ("metadata", "ObjectMeta"), 2: ("spec", "LimitRangeSpec")},
    "LimitRangeSpec": {1: ("limits", "[]LimitRangeItem")},
    "LimitRangeItem": {
        1: ("type", "string"),
        2: ("max", "map:quantity"),
        3: ("min", "map:quantity"),
        4: ("default", "map:quantity"),
        5: ("defaultRequest", "map:quantity"),
        6: ("maxLimitRequestRatio", "map:quantity"),
    },
    # k8s.io/api/batch/v1
    "Job": {1: ("metadata", "ObjectMeta"), 2: ("spec", "JobSpec"), 3: ("status", SKIP)},
    "JobSpec": {
        1: ("parallelism", "int?"),
        2: ("completions", "int?"),
        3: ("activeDeadlineSeconds", "int?"),
        4: ("selector", "LabelSelector"),
        5: ("manualSelector", "bool?"),
        6: ("template", "PodTemplateSpec"),
        7: ("backoffLimit", "int?"),
        8: ("ttlSecondsAfterFinished", "int?"),
        9: ("completionMode", "string?"),
        10: ("suspend", "bool?"),
        14: ("podReplacementPolicy", "string?"),
        16: ("managedBy", "string?"),
    },
    # k8s.io/api/rbac/v1
    "Role": {1: ("metadata", "ObjectMeta"), 2: ("rules", "[]PolicyRule")},
    "PolicyRule": {
        1: ("verbs", "[]string"),
        2: ("apiGroups", "[]string"),
        3: ("resources", "[]string"),
        4: ("resourceNames", "[]string"),
        5: ("nonResourceURLs", "[]string"),
    },
    "RoleBinding": {
        1: ("metadata", "ObjectMeta"),
        2: ("subjects", "[]Subject"),
        3: ("roleRef", "RoleRef"),
    },
    "Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
    "ClusterRole": {1: ("metadata", "ObjectMeta"), 2: ("rules", "[]PolicyRule")},
    # k8s.io/api/authorization/v1 (what `kubectl auth can-i` sends)
    "SelfSubjectAccessReview": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "SelfSubjectAccessReviewSpec"),
        3: ("status", SKIP),
    },
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
    },
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    # k8s.io/api/policy/v1
    "Eviction": {1: ("metadata", "ObjectMeta"), 2: ("deleteOptions", "DeleteOptions")},
}
# (apiVersion, kind) of the envelope -> the message of its raw bytes.
KINDS = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Pod"): "Pod",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("v1", "LimitRange"): "LimitRange",
    ("batch/v1", "Job"): "Job",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("policy/v1", "Eviction"): "Eviction",
    ("meta.k8s.io/v1", "DeleteOptions"): "DeleteOptions",
    ("v1", "DeleteOptions"): "DeleteOptions",
}


class Undecodable(ApiError):
    """Protobuf kubesim has no table for: say so, and how to get around it."""

    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, what: str):
        super().__init__(
            f"kubesim cannot decode {what} from {CONTENT_TYPE}; send the object as JSON "
            "(kubectl create -f / apply -f)"
        )


def decode(body: bytes) -> dict:
    """The JSON form of a protobuf request body."""
    if not body.startswith(MAGIC):
        raise BadRequest(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    envelope = _message("Unknown", body[len(MAGIC) :], "Unknown")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if envelope.get("contentEncoding"):
        raise Undecodable(f"contentEncoding {envelope['contentEncoding']!r}")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise Undecodable(f"kind {kind!r} of {api_version!r}")
    obj = _message(message, envelope.get("raw", b""), kind)
    if message == "DeleteOptions":
        return obj
    return {"apiVersion": api_version, "kind": kind, **obj}


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise BadRequest("proto: the body is truncated or not protobuf (bad varint)")
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of each field: an int for varints, bytes else."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            length, i = _varint(data, i)
            if i + length > len(data):
                raise BadRequest("proto: the body is truncated (length past the end)")
            value, i = data[i : i + length], i + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = data[i : i + size], i + size
        else:
            raise BadRequest(f"proto: illegal wire type {wire} for field {number}")
        yield number, wire, value


def _message(name: str, data: bytes, path: str) -> dict:
    table = MESSAGES[name]
    out: dict = {}
    for number, wire, value in _fields(data):
        spec = table.get(number)
        if spec is None:
            if value in (0, b""):  # an empty non-pointer field Go always writes
                continue
            raise Undecodable(f"field {number} of {name} (at {path})")
        json_name, kind = spec
        if kind == SKIP:
            continue
        where = f"{path}.{json_name}"
        if kind.startswith("[]"):
            items = _repeated(kind[2:], wire, value, where)
            out.setdefault(json_name, []).extend(items)
        elif kind.startswith("map:"):
            key, item = _map_entry(kind[4:], _expect(wire, 2, value, where), where)
            out.setdefault(json_name, {})[key] = item
        else:
            pointer = kind.endswith("?")
            decoded = _value(kind.rstrip("?"), wire, value, where)
            if decoded is None or (not pointer and decoded in ("", 0, False)):
                continue
            out[json_name] = decoded
    return out


def _repeated(kind: str, wire: int, value, path: str) -> list:
    if kind == "int" and wire == 2:  # packed
        items, i = [], 0
        while i < len(value):
            item, i = _varint(value, i)
            items.append(_signed(item))
        return items
    return [_value(kind, wire, value, path)]


def _map_entry(kind: str, data: bytes, path: str) -> tuple[str, object]:
    entry = {1: "", 2: "" if kind == "string" else None}
    for number, wire, value in _fields(data):
        if number == 1:
            entry[1] = _value("string", wire, value, path)
        elif number == 2:
            entry[2] = _value(kind, wire, value, path)
    if entry[2] is None:
        entry[2] = "0"  # an empty Quantity
    return entry[1], entry[2]


def _expect(wire: int, wanted: int, value, path: str):
    if wire != wanted:
        raise BadRequest(f"proto: wrong wire type {wire} for {path}")
    return value


def _value(kind: str, wire: int, value, path: str):
    if kind in ("int", "bool"):
        if wire != 0:
            raise BadRequest(f"proto: wrong wire type {wire} for {path}")
        return bool(value) if kind == "bool" else _signed(value)
    if wire != 2:
        raise BadRequest(f"proto: wrong wire type {wire} for {path}")
    if kind == "string":
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"proto: {path} is not valid UTF-8") from None
    if kind == "bytes":
        return bytes(value)
    if kind == "time":
        return _time(value, path)
    if kind == "quantity":  # resource.Quantity: {string string = 1}
        fields = {n: v for n, _, v in _fields(value)}
        return _value("string", 2, fields.get(1, b"0"), path)
    if kind == "intstr":  # intstr.IntOrString: {type = 1, intVal = 2, strVal = 3}
        fields = {n: v for n, _, v in _fields(value)}
        if fields.get(1):
            return _value("string", 2, fields.get(3, b""), path)
        return _signed(fields.get(2, 0))
    if kind == "rawjson":  # runtime.RawExtension: {raw = 1}
        fields = {n: v for n, _, v in _fields(value)}
        try:
            return json.loads(fields.get(1, b"null"))
        except ValueError:
            raise BadRequest(f"proto: {path} holds no JSON") from None
    return _message(kind, value, path)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _time(data: bytes, path: str) -> str | None:
    """meta/v1 Time as a Timestamp {seconds = 1, nanos = 2}; the zero time is empty."""
    fields = {n: v for n, _, v in _fields(data)}
    if not fields:
        return None
    seconds = _signed(fields.get(1, 0))
    try:
        stamp = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise BadRequest(f"proto: {path} is out of range") from None
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
