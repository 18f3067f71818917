"""Lists as the apiserver's storage layer serves them: list-option checks, resourceVersion
semantics, and `limit`/`continue` pagination over a consistent snapshot.

Continue tokens have the apiserver's shape (unpadded base64url of
`{"v": "meta.k8s.io/v1", "rv": N, "start": "<key>\\u0000"}`); a token whose snapshot has
been compacted away is 410 Expired with an "inconsistent" token (`rv: -1`) that lists
the rest from the current state, as etcd3's store does.
"""

import base64
import binascii
import json

from .errors import BadRequest, Expired, FieldError, Invalid
from .storage import parse_resource_version

TOKEN_VERSION = "meta.k8s.io/v1"
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def encode_continue(rv: int, key: str) -> str:
    token = {"v": TOKEN_VERSION, "rv": rv, "start": key + "\x00"}
    data = json.dumps(token, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def decode_continue(token: str) -> tuple[int, str]:
    """(resourceVersion, key to start after) of a continue token, or a 400."""

    def invalid(reason: str = "") -> BadRequest:
        detail = f"continue key is not valid{': ' + reason if reason else ''}"
        return BadRequest(f"invalid continue token: {detail}")

    try:
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(data)
    except (binascii.Error, ValueError) as exc:
        raise invalid(str(exc)) from None
    if not isinstance(decoded, dict) or decoded.get("v") != TOKEN_VERSION:
        raise invalid("server does not recognize this encoded version")
    rv, start = decoded.get("rv"), decoded.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise invalid(f"incorrect encoded start resourceVersion (version {TOKEN_VERSION})")
    if not isinstance(start, str) or not start:
        raise invalid(f"encoded start key empty (version {TOKEN_VERSION})")
    return rv, start.rstrip("\x00")


def _limit(query: dict) -> int:
    raw = query.get("limit") or "0"
    try:
        return max(int(raw), 0)
    except ValueError:
        raise BadRequest(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def check_list_options(query: dict) -> None:
    """ValidateListOptions for a list (not a watch): a 422 for ListOptions."""
    match = query.get("resourceVersionMatch") or ""
    version = query.get("resourceVersion") or ""
    errors = []
    if match:
        if not version:
            errors.append(
                FieldError(
                    "Forbidden",
                    "resourceVersionMatch",
                    detail="resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if query.get("continue"):
            errors.append(
                FieldError(
                    "Forbidden",
                    "resourceVersionMatch",
                    detail="resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in ("Exact", "NotOlderThan"):
            errors.append(
                FieldError(
                    "NotSupported",
                    "resourceVersionMatch",
                    match,
                    'supported values: "Exact", "NotOlderThan", ""',
                )
            )
        if match == "Exact" and version == "0":
            errors.append(
                FieldError(
                    "Forbidden",
                    "resourceVersionMatch",
                    detail='resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if query.get("sendInitialEvents") not in (None, ""):
        errors.append(
            FieldError(
                "Forbidden",
                "sendInitialEvents",
                detail="sendInitialEvents is only supported on watch requests",
            )
        )
    if errors:
        raise Invalid(kind="ListOptions", group="meta.k8s.io", name="", errors=errors)


def list_page(store, rtype, namespace, query: dict) -> tuple[list[dict], dict]:
    """(objects, list metadata) for a list request: the snapshot the request asks for,
    cut at `limit`, with `continue` and `remainingItemCount` when more remain."""
    check_list_options(query)
    limit = _limit(query)
    token = query.get("continue")
    version = query.get("resourceVersion") or ""
    selectors = {
        "label_selector": query.get("labelSelector"),
        "field_selector": query.get("fieldSelector"),
    }
    start = None
    at_rv = None
    if token:
        at_rv, start = decode_continue(token)
        if version not in ("", "0"):
            raise BadRequest("specifying resource version is not allowed when using continue")
        if at_rv < 0:  # an inconsistent token: the rest, from the current state
            at_rv = None
    else:
        requested = _parse_list_resource_version(version)
        match = query.get("resourceVersionMatch") or ""
        if requested and (match == "Exact" or (not match and limit)):
            at_rv = requested
    objs, rv = store.list_refs(rtype.plural, namespace, at_rv=at_rv, **selectors)
    if objs is None:  # that snapshot is compacted away
        if token:
            error = Expired(INCONSISTENT_CONTINUE)
            error.list_meta = {"continue": encode_continue(-1, start)}
            raise error
        raise Expired(EXPIRED_LIST)
    if start is not None:
        objs = [o for o in objs if _key(rtype, namespace, o) > start]
    meta = {"resourceVersion": rv}
    if limit and len(objs) > limit:
        remaining = len(objs) - limit
        objs = objs[:limit]
        meta["continue"] = encode_continue(int(rv), _key(rtype, namespace, objs[-1]))
        if not any(selectors.values()):
            meta["remainingItemCount"] = remaining
    return objs, meta


def _parse_list_resource_version(version: str) -> int:
    try:
        return parse_resource_version(version)
    except BadRequest as error:
        raise BadRequest(f"invalid resource version: {error.message}") from None


def _key(rtype, namespace, obj: dict) -> str:
    """The object's etcd key below the list's prefix: `name` in a namespace, else
    `namespace/name` (list_refs sorts in this order)."""
    meta = obj["metadata"]
    if rtype.namespaced and not namespace:
        return f"{meta.get('namespace', '')}/{meta['name']}"
    return meta["name"]
