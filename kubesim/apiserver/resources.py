"""The registry of kinds kubesim serves (what discovery lists), and the roles every
cluster starts with."""

from dataclasses import dataclass, field

from . import strategies

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
READ_VERBS = ["get", "list", "watch"]


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    read_only: bool = False
    categories: tuple[str, ...] = ()
    verbs: list[str] = field(default_factory=lambda: list(VERBS))
    # The registry answers a DELETE with the object (ReturnDeletedObject: pods,
    # namespaces, resourcequotas); every other kind deleted at once answers a Status.
    returns_deleted_object: bool = False
    # The kind's rules on every write and delete (strategies.py).
    strategy: strategies.Strategy = field(kw_only=True)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def path(self, namespace: str | None, name: str | None = None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        path = prefix + (f"/namespaces/{namespace}" if self.namespaced and namespace else "")
        path += f"/{self.plural}"
        return path + (f"/{name}" if name else "")


RBAC = "rbac.authorization.k8s.io"
APPS = ["deployments", "replicasets", "statefulsets"]
RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in [
        ResourceType(
            "namespaces",
            "Namespace",
            "",
            "v1",
            False,
            ("ns",),
            ("status",),
            returns_deleted_object=True,
            strategy=strategies.NamespaceStrategy(),
        ),
        ResourceType(
            "nodes",
            "Node",
            "",
            "v1",
            False,
            ("no",),
            ("status",),
            strategy=strategies.NodeStrategy(),
        ),
        ResourceType(
            "pods",
            "Pod",
            "",
            "v1",
            True,
            ("po",),
            ("status", "log", "eviction"),
            categories=("all",),
            returns_deleted_object=True,
            strategy=strategies.PodStrategy(),
        ),
        ResourceType(
            "events", "Event", "", "v1", True, ("ev",), strategy=strategies.EventStrategy()
        ),
        ResourceType(
            "resourcequotas",
            "ResourceQuota",
            "",
            "v1",
            True,
            ("quota",),
            ("status",),
            returns_deleted_object=True,
            strategy=strategies.ResourceQuotaStrategy(),
        ),
        ResourceType(
            "limitranges",
            "LimitRange",
            "",
            "v1",
            True,
            ("limits",),
            strategy=strategies.LimitRangeStrategy(),
        ),
        ResourceType(
            "jobs",
            "Job",
            "batch",
            "v1",
            True,
            (),
            ("status",),
            categories=("all",),
            strategy=strategies.JobStrategy(),
        ),
        ResourceType(
            "deployments",
            "Deployment",
            "apps",
            "v1",
            True,
            ("deploy",),
            ("status",),
            categories=("all",),
            strategy=strategies.DeploymentStrategy(),
        ),
        ResourceType(
            "replicasets",
            "ReplicaSet",
            "apps",
            "v1",
            True,
            ("rs",),
            ("status",),
            categories=("all",),
            strategy=strategies.ReplicaSetStrategy(),
        ),
        ResourceType(
            "statefulsets",
            "StatefulSet",
            "apps",
            "v1",
            True,
            ("sts",),
            ("status",),
            categories=("all",),
            strategy=strategies.StatefulSetStrategy(),
        ),
        ResourceType("roles", "Role", RBAC, "v1", True, strategy=strategies.RoleStrategy()),
        ResourceType(
            "rolebindings",
            "RoleBinding",
            RBAC,
            "v1",
            True,
            strategy=strategies.RoleBindingStrategy(),
        ),
        ResourceType(
            "clusterroles", "ClusterRole", RBAC, "v1", False, strategy=strategies.RoleStrategy()
        ),
        ResourceType(
            "clusterrolebindings",
            "ClusterRoleBinding",
            RBAC,
            "v1",
            False,
            strategy=strategies.RoleBindingStrategy(),
        ),
        ResourceType(
            "networkpolicies",
            "NetworkPolicy",
            "networking.k8s.io",
            "v1",
            True,
            ("netpol",),
            strategy=strategies.NetworkPolicyStrategy(),
        ),
        # Answered, never stored (`kubectl auth can-i`): see kubesim/apiserver/auth.py.
        ResourceType(
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            "authorization.k8s.io",
            "v1",
            False,
            verbs=["create"],
            strategy=strategies.Strategy(),
        ),
    ]
}
BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES.values()}


def group_versions() -> dict[str, list[ResourceType]]:
    """{"v1": [...], "batch/v1": [...], ...} in registry order."""
    grouped: dict[str, list[ResourceType]] = {}
    for resource in RESOURCES.values():
        grouped.setdefault(resource.api_version, []).append(resource)
    return grouped


def _cluster_object(kind: str, name: str, body: dict) -> dict:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        **body,
    }


def builtin_cluster_roles() -> list[dict]:
    """The roles every cluster has: the user-facing ones (rules shortened to what
    kubesim serves) and the bootstrap roles that authorization relies on."""
    write = ["create", "delete", "deletecollection", "patch", "update"]
    core = ["pods", "pods/log", "pods/status", "events", "resourcequotas", "limitranges"]
    view_rules = [
        {"apiGroups": [""], "resources": core + ["namespaces"], "verbs": READ_VERBS},
        {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": READ_VERBS},
        {
            "apiGroups": ["apps"],
            "resources": APPS + [f"{r}/status" for r in APPS],
            "verbs": READ_VERBS,
        },
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": READ_VERBS,
        },
    ]
    edit_rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": write},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": write},
        {"apiGroups": ["apps"], "resources": APPS, "verbs": write},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": write},
        *view_rules,
    ]
    admin_rules = [
        {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"], "verbs": VERBS},
        *edit_rules,
    ]
    public_urls = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    discovery_urls = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*"]
    bootstrap = {
        "cluster-admin": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
        "system:discovery": [
            {"nonResourceURLs": sorted(discovery_urls + public_urls), "verbs": ["get"]}
        ],
        "system:public-info-viewer": [{"nonResourceURLs": public_urls, "verbs": ["get"]}],
        "system:basic-user": [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            }
        ],
    }
    roles = {"admin": admin_rules, "edit": edit_rules, "view": view_rules, **bootstrap}
    return [_cluster_object("ClusterRole", name, {"rules": r}) for name, r in roles.items()]


def builtin_cluster_role_bindings() -> list[dict]:
    """The bootstrap bindings: system:masters are cluster admins; every
    authenticated user may discover the API and ask what it may do."""
    groups = {
        "cluster-admin": ["system:masters"],
        "system:discovery": ["system:authenticated"],
        "system:public-info-viewer": ["system:authenticated", "system:unauthenticated"],
        "system:basic-user": ["system:authenticated"],
    }
    return [
        _cluster_object(
            "ClusterRoleBinding",
            name,
            {
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": g} for g in names],
            },
        )
        for name, names in groups.items()
    ]
