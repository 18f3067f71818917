"""Authentication and RBAC authorization, off unless asked for (`--token-auth-file`).

What the real kube-apiserver does, kept to what a client can tell apart:

- Bearer tokens from a static token file, as `--token-auth-file` reads it (CSV:
  `token,user,uid,"group1,group2"`), and ServiceAccount tokens minted here with the
  identity the ServiceAccount authenticator gives (`system:serviceaccount:NS:NAME`,
  groups `system:serviceaccounts`, `system:serviceaccounts:NS`). Every authenticated
  user also gets `system:authenticated`. Anonymous requests are refused with 401
  (like `--anonymous-auth=false`), and so is an unknown token.
- Request attributes parsed from the URL like the apiserver's RequestInfoFactory
  (verb, API group, resource, subresource, name, namespace; a namespace's own URL
  is in that namespace; `fieldSelector=metadata.name=x` names a list or watch).
- Authorization: `system:masters` may do anything; otherwise RBAC from the stored
  ClusterRoleBindings and, for a namespaced request, the RoleBindings of that
  namespace (rbac/v1 rule matching: `*` verbs, groups and resources, `*/sub`,
  resourceNames, nonResourceURLs with a trailing `*`).
- Escalation prevention on roles and bindings (the registry's policy-based storage):
  granting a role needs `bind` on it or every right it holds; writing a role needs
  `escalate` on it or every right it grants.

Messages are the apiserver's (k8s.io/apiserver responsewriters.forbiddenMessage,
apierrors.NewForbidden, rbac validation.ConfirmNoEscalation), so a client sees
the same 401 and 403 bodies a real cluster sends.
"""

import contextvars
import csv
import secrets
from dataclasses import dataclass, field
from urllib.parse import unquote

from .errors import ApiError, FieldError, Invalid, qualified_resource

RBAC_GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ROLE_KINDS = {"roles", "clusterroles"}
BINDING_KINDS = {"rolebindings", "clusterrolebindings"}
# The user of the request this thread is serving: the escalation checks run as
# admission hooks inside the store, which knows nothing of requests.
current_user: contextvars.ContextVar = contextvars.ContextVar("kubesim_user", default=None)


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


@dataclass
class Attributes:
    """authorizer.Attributes: what a request asks to do."""

    verb: str
    path: str = ""
    resource_request: bool = False
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    user: User | None = field(default=None, compare=False)


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"

    def __init__(self):
        super().__init__("Unauthorized")


class Forbidden(ApiError):
    """apierrors.NewForbidden: the details are there even when all empty."""

    code = 403
    reason = "Forbidden"
    attributes: Attributes | None = None  # what was refused (kubesim's request log shows it)

    def __init__(self, group: str, resource: str, name: str, err: str):
        if not resource:
            message = f"forbidden: {err}"
        elif not name:
            message = f"{qualified_resource(resource, group)} is forbidden: {err}"
        else:
            message = f'{qualified_resource(resource, group)} "{name}" is forbidden: {err}'
        details = {"name": name, "group": group, "kind": resource}
        super().__init__(message, details={k: v for k, v in details.items() if v})

    def to_status(self) -> dict:
        return super().to_status() | {"details": self.details}


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _go_strings(values) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(_go_quote(v) for v in values) + "]"


def _sanitize(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_message(attrs: Attributes) -> str:
    username = attrs.user.name if attrs.user else ""
    if not attrs.resource_request:
        return f"User {_go_quote(username)} cannot {attrs.verb} path {_go_quote(attrs.path)}"
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    head = (
        f"User {_go_quote(username)} cannot {attrs.verb} resource {_go_quote(resource)} "
        f"in API group {_go_quote(attrs.api_group)}"
    )
    if attrs.namespace:
        return f"{head} in the namespace {_go_quote(attrs.namespace)}"
    return f"{head} at the cluster scope"


def forbidden(attrs: Attributes, reason: str) -> Forbidden:
    """responsewriters.Forbidden for a request the authorizer did not allow."""
    message = _sanitize(forbidden_message(attrs))
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request:
        error = Forbidden("", "", "", message)
    else:
        error = Forbidden(attrs.api_group, attrs.resource, attrs.name, message)
    error.attributes = attrs
    return error


# --- request attributes (RequestInfoFactory.NewRequestInfo) ---

METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def request_attributes(method: str, path: str, query: dict) -> Attributes:
    parts = [p for p in path.split("/") if p]
    verb = METHOD_VERBS.get(method, "")
    attrs = Attributes(verb=verb, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return attrs  # non-resource: /api, /apis/batch, /version, /healthz, ...
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return attrs
        attrs.api_group, rest = rest[0], rest[1:]
    attrs.resource_request = True
    rest = rest[1:]  # the version
    if rest[0] == "watch":
        attrs.verb, rest = "watch", rest[1:]
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        attrs.namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    if len(rest) >= 3:
        attrs.subresource = rest[2]
    if len(rest) >= 2:
        attrs.name = rest[1]
    if rest:
        attrs.resource = rest[0]
    if not attrs.name and attrs.verb == "get":
        attrs.verb = "watch" if query.get("watch") in ("1", "true", "True") else "list"
        for term in (query.get("fieldSelector") or "").split(","):
            key, _, value = term.partition("==" if "==" in term else "=")
            if key.strip() == "metadata.name" and value:
                attrs.name = value.strip()
                break
    if not attrs.name and attrs.verb == "delete":
        attrs.verb = "deletecollection"
    return attrs


# --- authentication ---


def service_account_user(namespace: str, name: str) -> User:
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
    )


class Authenticator:
    def __init__(self):
        self.tokens: dict[str, User] = {}

    def load_token_file(self, path: str) -> None:
        """--token-auth-file: token,user,uid[,"group1,group2"] per line."""
        with open(path, newline="") as handle:
            for record in csv.reader(handle, skipinitialspace=True):
                if not record:
                    continue
                if len(record) < 3:
                    raise ValueError(
                        f"token file '{path}' must have at least 3 columns "
                        f"(token, user name, user uid), found {len(record)}"
                    )
                if record[0]:
                    groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
                    self.tokens[record[0]] = User(record[1], record[2], groups)

    def add_token(self, token: str, user: User) -> str:
        self.tokens[token] = user
        return token

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for the ServiceAccount NAME in NAMESPACE (what a pod has mounted)."""
        return self.add_token(secrets.token_urlsafe(24), service_account_user(namespace, name))

    def authenticate(self, header: str | None) -> User:
        scheme, _, token = (header or "").strip().partition(" ")
        user = self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise Unauthorized()
        groups = user.groups if AUTHENTICATED in user.groups else (*user.groups, AUTHENTICATED)
        return User(user.name, user.uid, groups)


# --- RBAC ---


def _has(values, value) -> bool:
    return value in (values or ())


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    """rbac.RuleAllows."""
    verbs = rule.get("verbs") or []
    if not (_has(verbs, "*") or _has(verbs, attrs.verb)):
        return False
    if not attrs.resource_request:
        return any(
            url == "*"
            or url == attrs.path
            or (url.endswith("*") and attrs.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if not (_has(groups, "*") or _has(groups, attrs.api_group)):
        return False
    combined = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}")
        for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _applies_to(user: User, subject: dict, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return user.name == subject.get("name")
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == (
            f"system:serviceaccount:{namespace}:{subject.get('name')}"
        )
    return False


class Rbac:
    """The RBAC authorizer and rule resolver over kubesim's store."""

    def __init__(self, store):
        self.store = store

    def _role_rules(self, ref: dict, namespace: str, *, registry=False) -> tuple[list, str]:
        """(rules, error) of a roleRef, as GetRoleReferenceRules finds them. The
        authorizer's listers name a missing role in the singular, the registry's
        getters (the escalation check) in the plural."""
        kind, name = ref.get("kind"), ref.get("name", "")
        resource, ns = ("clusterroles", None) if kind == "ClusterRole" else ("roles", namespace)
        if kind not in ("ClusterRole", "Role"):
            return [], f'unsupported role reference kind: "{kind}"'
        try:
            role = self.store.get_ref(resource, ns, name)
        except ApiError:
            noun = resource if registry else resource[:-1]
            return [], f'{noun}.{RBAC_GROUP} "{name}" not found'
        return role.get("rules") or [], ""

    def _bindings(self, namespace: str):
        """(binding, its namespace) of the cluster, then of `namespace`."""
        for binding in self.store.list_refs("clusterrolebindings")[0]:
            yield binding, ""
        if namespace:
            for binding in self.store.list_refs("rolebindings", namespace)[0]:
                yield binding, namespace

    def visit_rules(self, user: User, namespace: str):
        """(rules of one role bound to `user`, error) for every binding that applies."""
        for binding, binding_ns in self._bindings(namespace):
            if any(_applies_to(user, s, binding_ns) for s in binding.get("subjects") or []):
                yield self._role_rules(binding.get("roleRef") or {}, binding_ns)

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the privileged group, then RBAC."""
        user = attrs.user
        if user is not None and MASTERS in user.groups:
            return True, ""
        errors = []
        with self.store.lock:
            for rules, error in self.visit_rules(user, attrs.namespace):
                if error:
                    errors.append(error)
                if any(rule_allows(rule, attrs) for rule in rules):
                    return True, ""
        if not errors:
            return False, ""
        return False, "RBAC: " + (errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")

    def rules_for(self, user: User, namespace: str) -> tuple[list, list]:
        rules, errors = [], []
        for found, error in self.visit_rules(user, namespace):
            rules += found
            if error:
                errors.append(error)
        return rules, errors

    # --- escalation prevention (admission hooks on roles and bindings) ---

    def install(self) -> None:
        for resource in ROLE_KINDS | BINDING_KINDS:
            self.store.add_admission(resource, self._admit, before_validation=True)

    def _admit(self, operation, obj, old, store) -> None:
        user = current_user.get()
        if user is None or MASTERS in user.groups:
            return  # kubesim's own writes, or the privileged group (EscalationAllowed)
        if old is not None and _only_gc_fields_changed(obj, old):
            return
        meta = obj["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        resource = obj["kind"].lower() + "s"
        if resource in BINDING_KINDS:
            ref = obj.get("roleRef") or {}
            target = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            check = Attributes("bind", resource_request=True, api_group=ref.get("apiGroup", ""))
            check.resource, check.name = target, ref.get("name", "")
            rules, error = self._role_rules(ref, namespace, registry=True)
        else:
            check = Attributes("escalate", resource_request=True, api_group=RBAC_GROUP)
            check.resource, check.name = resource, name
            rules, error = obj.get("rules") or [], ""
        check.namespace, check.user = namespace, user
        if self.authorize(check)[0]:
            return
        if error:
            raise _refused(Forbidden(RBAC_GROUP, resource, name, error), check)
        owner_rules, resolution_errors = self.rules_for(user, namespace)
        missing = uncovered(owner_rules, rules)
        if missing:
            message = (
                f"user {_go_quote(user.name)} (groups={_go_strings(user.groups)}) is attempting "
                "to grant RBAC permissions not currently held:\n"
                + "\n".join(sorted({compact_string(r) for r in compact(missing)}))
            )
            if resolution_errors:
                message += f"; resolution errors: [{', '.join(resolution_errors)}]"
            raise _refused(Forbidden(RBAC_GROUP, resource, name, message), check)


def _refused(error: Forbidden, attrs: Attributes) -> Forbidden:
    error.attributes = attrs
    return error


def _only_gc_fields_changed(new: dict, old: dict) -> bool:
    """IsOnlyMutatingGCFields (managedFields left out too: kubesim renders them later)."""
    ignored = {"ownerReferences", "finalizers", "resourceVersion", "managedFields"}
    ignored |= {"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}

    def strip(obj):
        meta = {k: v for k, v in obj["metadata"].items() if k not in ignored}
        return {**obj, "metadata": meta}

    return strip(new) == strip(old)


# --- rule coverage (rbac validation.Covers, BreakdownRule, CompactRules) ---


def breakdown(rule: dict) -> list[dict]:
    subrules = []
    names = rule.get("resourceNames") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                subrules += [base | {"resourceNames": [n]} for n in names] or [base]
    for url in rule.get("nonResourceURLs") or []:
        subrules += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in rule.get("verbs")]
    return subrules


def _has_all(values, wanted) -> bool:
    return set(wanted) <= set(values or ())


def _resources_cover(owned, wanted) -> bool:
    if "*" in (owned or ()) or _has_all(owned, wanted):
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path or f"*/{path.split('/', 1)[1]}" not in owned:
            return False
    return True


def _urls_cover(owned, wanted) -> bool:
    return all(
        any(o == w or (o.endswith("*") and w.startswith(o[:-1])) for o in owned or ())
        for w in wanted or ()
    )


def rule_covers(owner: dict, sub: dict) -> bool:
    verbs, groups = owner.get("verbs") or [], owner.get("apiGroups") or []
    owner_names, sub_names = owner.get("resourceNames") or [], sub.get("resourceNames") or []
    if sub_names:
        names_match = not owner_names or _has_all(owner_names, sub_names)
    else:
        names_match = not owner_names
    return (
        ("*" in verbs or _has_all(verbs, sub.get("verbs")))
        and ("*" in groups or _has_all(groups, sub.get("apiGroups")))
        and _resources_cover(owner.get("resources") or [], sub.get("resources") or [])
        and _urls_cover(owner.get("nonResourceURLs"), sub.get("nonResourceURLs"))
        and names_match
    )


def uncovered(owner_rules: list, servant_rules: list) -> list[dict]:
    return [
        sub
        for rule in servant_rules
        for sub in breakdown(rule)
        if not any(rule_covers(owner, sub) for owner in owner_rules)
    ]


def compact(rules: list[dict]) -> list[dict]:
    """Simple one-group, one-resource rules merged by verb (broken-down rules all are)."""
    merged: dict[tuple, dict] = {}
    others = []
    for rule in rules:
        if "nonResourceURLs" in rule:
            others.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], tuple(rule.get("resourceNames") or ()))
        if key in merged:
            verbs = merged[key]["verbs"]
            verbs += [v for v in rule["verbs"] if v not in verbs]
        else:
            merged[key] = {**rule, "verbs": list(rule["verbs"])}
    return others + list(merged.values())


def compact_string(rule: dict) -> str:
    """rbacv1helpers.CompactString: {APIGroups:["batch"], Resources:["jobs"], Verbs:["get"]}."""
    parts = [
        f"{label}:{_go_strings(rule[key])}"
        for key, label in (
            ("apiGroups", "APIGroups"),
            ("resources", "Resources"),
            ("nonResourceURLs", "NonResourceURLs"),
            ("resourceNames", "ResourceNames"),
            ("verbs", "Verbs"),
        )
        if rule.get(key)
    ]
    return "{" + ", ".join(parts) + "}"


def describe(attrs: Attributes) -> dict:
    """The attributes of a refused request, for kubesim's request log."""
    if not attrs.resource_request:
        return {"verb": attrs.verb, "path": attrs.path}
    fields = ("verb", "api_group", "resource", "subresource", "name", "namespace")
    return {f: getattr(attrs, f) for f in fields}


def access_review(auth, user: User | None, review: dict) -> dict:
    """A SelfSubjectAccessReview answered for `user` (everyone may do everything
    when kubesim runs without auth)."""
    spec = review.get("spec") or {}
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (other is None):
        detail = (
            "cannot be specified in combination with resourceAttributes"
            if resource is not None
            else "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
        field = "spec.nonResourceAttributes" if resource is not None else "spec.resourceAttributes"
        raise Invalid(
            kind="SelfSubjectAccessReview",
            group="authorization.k8s.io",
            name="",
            errors=[FieldError("Invalid", field, other, detail)],
        )
    if resource is not None:
        attrs = Attributes(
            resource.get("verb", ""),
            resource_request=True,
            api_group=resource.get("group", ""),
            resource=resource.get("resource", ""),
            subresource=resource.get("subresource", ""),
            name=resource.get("name", ""),
            namespace=resource.get("namespace", ""),
        )
    else:
        attrs = Attributes(other.get("verb", ""), path=other.get("path", ""))
    attrs.user = user
    allowed, reason = (True, "") if auth is None else auth.rbac.authorize(attrs)
    status = {"allowed": allowed} | ({"reason": reason} if reason else {})
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


class Auth:
    """What the server consults: who is asking (401) and whether they may (403)."""

    def __init__(self, store, token_file: str | None = None):
        self.authenticator = Authenticator()
        if token_file:
            self.authenticator.load_token_file(token_file)
        self.rbac = Rbac(store)
        self.rbac.install()

    def add_token(self, token: str, name: str, *, uid: str = "", groups=()) -> str:
        return self.authenticator.add_token(token, User(name, uid, tuple(groups)))

    def service_account_token(self, namespace: str, name: str) -> str:
        return self.authenticator.service_account_token(namespace, name)

    def authenticate(self, header: str | None) -> User:
        return self.authenticator.authenticate(header)

    def authorize(self, user: User, method: str, path: str, query: dict) -> Attributes:
        """The request's attributes, or Forbidden."""
        attrs = request_attributes(method, unquote(path), query)
        attrs.user = user
        allowed, reason = self.rbac.authorize(attrs)
        if not allowed:
            raise forbidden(attrs, reason)
        return attrs

    def authorize_create(self, user: User, attrs: Attributes) -> None:
        """A server-side apply that creates its object is authorized as `create` too,
        and refused with the authorizer's reason alone (patch.go withAuthorization)."""
        create = Attributes(
            "create",
            path=attrs.path,
            resource_request=True,
            api_group=attrs.api_group,
            resource=attrs.resource,
            subresource=attrs.subresource,
            name=attrs.name,
            namespace=attrs.namespace,
            user=user,
        )
        allowed, reason = self.rbac.authorize(create)
        if not allowed:
            raise _refused(Forbidden(attrs.api_group, attrs.resource, attrs.name, reason), create)
