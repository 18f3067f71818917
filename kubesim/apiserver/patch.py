"""The four patch flavours the apiserver accepts, and the field ownership behind
server-side apply.

Strategic merge and apply merge lists by key only for the fields listed in
MERGE_KEYS (what the Go types mark `patchStrategy:"merge"`); every other list is
atomic and replaced whole.
"""

import json

from .errors import BadRequest, Conflict, PatchFailed

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
    "addresses": "type",
    "resourceClaims": "name",
}
PRIMITIVE_MERGE = {"finalizers"}


def copy_json(value):
    """A deep copy for JSON-shaped data, several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


# --- RFC 7386 JSON merge patch ---


def merge_patch(original, patch):
    if not isinstance(patch, dict):
        return copy_json(patch)
    result = copy_json(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- strategic merge patch ---


def strategic_merge(original, patch):
    """Apply a strategic merge patch (with its `$patch`, `$retainKeys`,
    `$deleteFromPrimitiveList` and `$setElementOrder` directives) to a dict."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives(patch)
    if directive == "delete":
        return None
    result = copy_json(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, key)
        else:
            result[key] = value
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _strip_directives(value):
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value if not (isinstance(v, dict) and "$patch" in v)]
    return value


def _merge_list(original, patch: list, field: str) -> list:
    if field in PRIMITIVE_MERGE:
        merged = list(original or [])
        merged += [v for v in patch if v not in merged]
        return merged
    key = MERGE_KEYS.get(field)
    items_are_keyed = all(isinstance(i, dict) for i in patch)
    if (
        not key
        or not items_are_keyed
        or any(i.get("$patch") == "replace" for i in patch)
        or not isinstance(original, list)
    ):
        return _strip_directives(patch)
    result = copy_json(original)
    for item in patch:
        index = next(
            (
                n
                for n, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


# --- RFC 6902 JSON patch ---


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise BadRequest(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc, parts):
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def json_patch(document, operations):
    if not isinstance(operations, list):
        raise BadRequest("json patch must be a list of operations")
    for op in operations:
        # Decoding fails (400) on a non-object; applying fails (422) on anything else.
        if op is not None and not isinstance(op, dict):
            kind = {str: "string", bool: "bool", list: "array"}.get(type(op), "number")
            raise BadRequest(
                f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Operation"
            )
    doc = copy_json(document)
    for op in operations:
        try:
            doc = _json_patch_op(doc, op)
        except (KeyError, IndexError, ValueError, TypeError, BadRequest):
            raise PatchFailed() from None
    return doc


def _json_patch_op(doc, op):
    name = op["op"]
    parts = _pointer(op["path"])
    if name == "test":
        if _resolve(doc, parts) != op["value"]:
            raise ValueError(f"testing value {op['path']} failed")
        return doc
    if name in ("move", "copy"):
        source = _pointer(op["from"])
        value = copy_json(_resolve(doc, source))
        if name == "move":
            doc = _json_patch_op(doc, {"op": "remove", "path": op["from"]})
        return _json_patch_op(doc, {"op": "add", "path": op["path"], "value": value})
    if not parts:
        if name in ("add", "replace"):
            return copy_json(op["value"])
        raise ValueError("cannot remove the whole document")
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if name == "add":
            if index > len(parent):
                raise IndexError("index out of range")
            parent.insert(index, copy_json(op["value"]))
        elif name == "remove":
            del parent[index]
        elif name == "replace":
            parent[index] = copy_json(op["value"])
        else:
            raise ValueError(f"unknown op {name}")
    else:
        if name == "add":
            parent[last] = copy_json(op["value"])
        elif name == "remove":
            del parent[last]
        elif name == "replace":
            if last not in parent:
                raise KeyError(
                    f"replace operation does not apply: doc is missing key: {op['path']}"
                )
            parent[last] = copy_json(op["value"])
        else:
            raise ValueError(f"unknown op {name}")
    return doc


# --- field ownership (metadata.managedFields, simplified) ---
#
# A field set is a set of paths to leaves; a path is a tuple of fieldsV1 elements:
# "f:spec" for a map key, 'k:{"name":"c"}' for the item of a keyed list. Atomic lists
# and scalars are leaves. Status and server-owned metadata are not tracked.

OWNED_METADATA = {"labels", "annotations", "ownerReferences", "finalizers"}


def field_set(obj: dict) -> set[tuple]:
    paths: set[tuple] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            for meta_key in OWNED_METADATA & set(value or {}):
                _collect(value[meta_key], ("f:metadata", "f:" + meta_key), meta_key, paths)
            continue
        _collect(value, ("f:" + key,), key, paths)
    return paths


def _item_key(field: str, item) -> str | None:
    key = MERGE_KEYS.get(field)
    if key and isinstance(item, dict) and key in item:
        return "k:" + json.dumps({key: item[key]}, separators=(",", ":"))
    return None


def _collect(value, path: tuple, field: str, paths: set) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _collect(sub, (*path, "f:" + key), key, paths)
    elif isinstance(value, list) and value and all(_item_key(field, item) for item in value):
        for item in value:
            _collect(item, (*path, _item_key(field, item)), "", paths)
    else:
        paths.add(path)


def value_at(obj, path: tuple):
    """The value at a field path, or a sentinel when absent."""
    for element in path:
        if element.startswith("f:"):
            if not isinstance(obj, dict) or element[2:] not in obj:
                return MISSING
            obj = obj[element[2:]]
        else:
            ((key, wanted),) = json.loads(element[2:]).items()
            if not isinstance(obj, list):
                return MISSING
            obj = next((i for i in obj if isinstance(i, dict) and i.get(key) == wanted), MISSING)
            if obj is MISSING:
                return MISSING
    return obj


MISSING = object()


def remove_path(obj, path: tuple) -> None:
    parent = value_at(obj, path[:-1])
    last = path[-1]
    if parent is MISSING:
        return
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        ((key, wanted),) = json.loads(last[2:]).items()
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == wanted)]


def to_fields_v1(paths: set[tuple]) -> dict:
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: dict, prefix: tuple = ()) -> set[tuple]:
    paths: set[tuple] = set()
    for element, sub in (tree or {}).items():
        if element == ".":
            continue
        if sub:
            paths |= from_fields_v1(sub, (*prefix, element))
        else:
            paths.add((*prefix, element))
    return paths


def format_path(path: tuple) -> str:
    """`.spec.containers[name="c"].image`, as apply conflicts print field paths."""
    text = ""
    for element in path:
        if element.startswith("f:"):
            text += "." + element[2:]
        else:
            ((key, value),) = json.loads(element[2:]).items()
            text += f"[{key}={json.dumps(value)}]"
    return text


def managers(obj: dict) -> list[dict]:
    return (obj.get("metadata") or {}).get("managedFields") or []


def manager_label(entry: dict) -> str:
    if entry.get("operation") == "Update":
        return f'"{entry["manager"]}" using {entry.get("apiVersion", "v1")}'
    return f'"{entry["manager"]}"'


def apply_config(live: dict | None, config: dict, manager: str, *, force: bool):
    """Server-side apply of `config` by `manager` onto `live` (None: create).

    Returns (merged object, {(manager, operation): field set}) where the dict holds the
    new field sets of every manager. Raises Conflict when another manager owns a field
    the config sets to a different value, unless `force`.
    """
    applied = field_set(config)
    owners = {
        (e["manager"], e.get("operation", "Update")): from_fields_v1(e.get("fieldsV1") or {})
        for e in managers(live or {})
    }
    entries = {(e["manager"], e.get("operation", "Update")): e for e in managers(live or {})}
    previous = owners.get((manager, "Apply"), set())
    if live is not None:
        conflicts: dict[tuple, list[tuple]] = {}
        for owner, paths in owners.items():
            if owner == (manager, "Apply"):
                continue
            for path in sorted(applied & paths):
                if value_at(live, path) != value_at(config, path):
                    conflicts.setdefault(owner, []).append(path)
        if conflicts and not force:
            raise _apply_conflict(conflicts, entries)
        for owner, paths in conflicts.items():
            owners[owner] = owners[owner] - set(paths)
        # An Update manager also loses fields the applier sets to a new value.
    merged = strategic_merge(live or {}, config)
    owners[(manager, "Apply")] = applied
    still_owned = set().union(*owners.values()) if owners else set()
    for path in previous - applied:
        # A released leaf that is now the parent of owned fields (`annotations: {}`
        # applied before, `annotations: {a: b}` now) stays, as in structured-merge-diff.
        if not any(p[: len(path)] == path for p in still_owned):
            remove_path(merged, path)
    _drop_orphan_items(merged, previous - applied, still_owned)
    return merged, {owner: paths for owner, paths in owners.items() if paths}


def _drop_orphan_items(merged: dict, released: set[tuple], still_owned: set[tuple]) -> None:
    """A keyed list item that nobody owns any field of any more is removed whole."""
    for path in released:
        for depth, element in enumerate(path):
            if element.startswith("k:"):
                item = path[: depth + 1]
                if not any(p[: depth + 1] == item for p in still_owned):
                    remove_path(merged, item)
                break


def _apply_conflict(conflicts: dict[tuple, list[tuple]], entries: dict) -> Conflict:
    total = sum(len(paths) for paths in conflicts.values())
    lines, causes = [], []
    for owner, paths in conflicts.items():
        label = manager_label(entries[owner])
        formatted = [format_path(p) for p in paths]
        if len(formatted) == 1:
            lines.append(f"conflict with {label}: {formatted[0]}")
        else:
            lines.append(f"conflicts with {label}:\n- " + "\n- ".join(formatted))
        causes += [
            {"reason": "FieldManagerConflict", "message": f"conflict with {label}", "field": f}
            for f in formatted
        ]
    message = f"Apply failed with {total} conflict{'s' if total > 1 else ''}: " + "\n".join(lines)
    return Conflict(message=message, causes=causes)


def update_owners(old: dict | None, new: dict, manager: str) -> dict[tuple, set]:
    """Field sets after a non-apply write by `manager`: it takes every field it changed,
    and every manager forgets the fields that are gone."""
    owners = {
        (e["manager"], e.get("operation", "Update")): from_fields_v1(e.get("fieldsV1") or {})
        for e in managers(old or {})
    }
    new_fields = field_set(new)
    old_obj = old or {}
    changed = {p for p in new_fields if value_at(old_obj, p) != value_at(new, p)}
    for owner in list(owners):
        owners[owner] = (owners[owner] & new_fields) - changed
    if changed:
        owners[(manager, "Update")] = owners.get((manager, "Update"), set()) | changed
    return {owner: paths for owner, paths in owners.items() if paths}


def render_managed_fields(
    old_entries: list[dict], owners: dict[tuple, set], api_version: str, now: str
) -> list[dict]:
    """managedFields entries; an entry keeps its timestamp unless its fields changed."""
    previous = {(e["manager"], e.get("operation", "Update")): e for e in old_entries}
    entries = []
    for (manager, operation), paths in owners.items():
        fields = to_fields_v1(paths)
        old = previous.get((manager, operation))
        if old and old.get("fieldsV1") == fields:
            entries.append(old)
            continue
        entries.append(
            {
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            }
        )
    return entries
