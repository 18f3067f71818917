"""Kubernetes objects for a team, built by pure functions (plain data in, dicts out).

No API calls and no database here, so each builder is tested by comparing its
output and validated against the Kubernetes JSON schemas. Names are fixed, so a
retried apply lands on the same object.
"""

from cluster.devices import is_dra_quota_resource
from teams.namespaces import MANAGED_BY, MANAGED_BY_LABEL, TEAM_LABEL, namespace_of

QUOTA_NAME = "gpu-quota"
# A second ResourceQuota while the team's hard budget is spent: its name is what a
# refused pod's message says ("exceeded quota: gpu-budget-spent, ...").
BUDGET_QUOTA_NAME = "gpu-budget-spent"
LIMIT_RANGE_NAME = "gpu-portal-defaults"
ROLE_BINDING_NAME = "gpu-portal-team"
NETWORK_POLICY_NAME = "gpu-portal-default-deny-ingress"

# Default container requests, so pods that ask for nothing are still admitted
# in a namespace whose quota lists compute resources.
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
# Team namespaces enforce the `restricted` Pod Security standard (`namespace`
# below): what it demands of every pod and container.
POD_SECURITY = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
EXAMPLE_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


def _labels(team_slug):
    # What makes a namespace the portal's for the team (teams.namespaces.owned).
    return {MANAGED_BY_LABEL: MANAGED_BY, TEAM_LABEL: team_slug}


def _metadata(name, namespace, team_slug):
    return {"name": name, "namespace": namespace, "labels": _labels(team_slug)}


def namespace(team_slug, prefix="", *, labels=None, annotations=None):
    """The team's namespace, with Pod Security Admission `restricted` enforced,
    plus the operator's labels and annotations (ours win on a clash)."""
    metadata = {
        "name": namespace_of(team_slug, prefix),
        "labels": {
            **(labels or {}),
            **_labels(team_slug),
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        },
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def quota_key(resource):
    """The ResourceQuota key that caps `resource`.

    Extended resources (`nvidia.com/gpu`) are capped only under the `requests.`
    prefix. A DeviceClass's devices (`<class>.deviceclass.resource.k8s.io/devices`,
    a DRA flavor's resource name) are capped under that key as it is: Kubernetes
    (checked on v1.37.2) also accepts `requests.<class>...` and never enforces it.
    """
    return resource if is_dra_quota_resource(resource) else f"requests.{resource}"


def quota_hard(gpus_by_resource):
    """`{"nvidia.com/gpu": 4, "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2}` ->
    `{"requests.nvidia.com/gpu": "4", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2"}`.

    Quantities are strings, as the API server returns them, so a live object
    compares equal to the desired one.
    """
    return {
        quota_key(resource): str(int(gpus)) for resource, gpus in sorted(gpus_by_resource.items())
    }


def resource_quota(namespace, team_slug, gpus_by_resource, annotations=None):
    """The team's quota; `annotations` are what it holds of each flavor, the
    parameters of its admission policies (provisioning/policies.py)."""
    metadata = _metadata(QUOTA_NAME, namespace, team_slug)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": metadata,
        "spec": {"hard": quota_hard(gpus_by_resource)},
    }


def budget_quota(namespace, team_slug, gpus_by_resource):
    """The cap while the team's hard budget is spent: each GPU resource at what the
    team runs now, so nothing new starts (Kubernetes evicts nothing over quota). Kept
    beside `gpu-quota`, which stays as approved, so the refusal names the budget."""
    quota = resource_quota(namespace, team_slug, gpus_by_resource)
    quota["metadata"]["name"] = BUDGET_QUOTA_NAME
    quota["metadata"]["annotations"] = {
        "gpu-portal.io/reason": "The team's hard GPU budget is spent: new GPU work is held "
        "until the month turns or the budget is raised (see the team's page in the portal)."
    }
    return quota


def limit_range(namespace, team_slug, default_requests=None):
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(LIMIT_RANGE_NAME, namespace, team_slug),
        "spec": {
            "limits": [
                {"type": "Container", "defaultRequest": dict(default_requests or DEFAULT_REQUESTS)}
            ]
        },
    }


def group_subjects(group_names):
    return [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}
        for name in sorted(group_names)
    ]


def user_subjects(user_names):
    return [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}
        for name in sorted(set(user_names))
    ]


def role_binding(namespace, team_slug, subjects, cluster_role="edit"):
    """Access to the team's own namespace only: a RoleBinding, never a ClusterRoleBinding.

    A team with no subjects (users mode, no members) still gets the binding with an
    empty list, so removing the last member removes their access.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(ROLE_BINDING_NAME, namespace, team_slug),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role,
        },
        "subjects": list(subjects),
    }


def network_policy(namespace, team_slug):
    """Deny all ingress to the namespace's pods (egress stays open)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(NETWORK_POLICY_NAME, namespace, team_slug),
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def team_objects(
    *,
    team_slug,
    prefix,
    gpus_by_resource,
    subjects,
    cluster_role,
    default_requests=None,
    namespace_labels=None,
    namespace_annotations=None,
    quota_annotations=None,
):
    """Every object a team gets, namespace first (the others live in it)."""
    ns = namespace_of(team_slug, prefix)
    return [
        namespace(team_slug, prefix, labels=namespace_labels, annotations=namespace_annotations),
        resource_quota(ns, team_slug, gpus_by_resource, quota_annotations),
        limit_range(ns, team_slug, default_requests),
        role_binding(ns, team_slug, subjects, cluster_role),
        network_policy(ns, team_slug),
    ]


def example_job(*, namespace, flavor_slug, resource_name, node_selector, tolerations, gpus=1):
    """A Job a team can apply as it is to run on one flavor: the flavor's node
    selector (the labels `cluster.inventory.node_serves_flavor` checks) and
    tolerations, the GPUs as `resources.limits` (requests follow), and the
    restricted Pod Security its namespace enforces."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"gpu-check-{flavor_slug}", "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {**POD_SECURITY, "runAsUser": 1000},
                    "nodeSelector": dict(node_selector),
                    "tolerations": [dict(t) for t in tolerations],
                    "containers": [
                        {
                            "name": "main",
                            "image": EXAMPLE_IMAGE,
                            "command": ["nvidia-smi"],
                            "resources": {"limits": {resource_name: str(gpus)}},
                            "securityContext": CONTAINER_SECURITY,
                        }
                    ],
                }
            },
        },
    }


def claim_template(*, namespace, name, device_class, device_selector="", gpus=1):
    """A ResourceClaimTemplate asking for `gpus` devices of a DRA flavor: its
    DeviceClass, narrowed by its selector. Each pod made from a template gets a
    claim of its own, deleted with the pod."""
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": gpus}
    if device_selector:
        exactly["selectors"] = [{"cel": {"expression": device_selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
    }


def example_dra_job(*, namespace, flavor_slug, device_class, device_selector, tolerations, gpus=1):
    """[ResourceClaimTemplate, Job] a team can apply as they are to run on one DRA
    flavor: the claim names the flavor's DeviceClass and selector (the devices
    `cluster.inventory.device_serves` counts), the pod lists it in
    `resourceClaims` and its container in `resources.claims`; no node selector
    and no extended resource (the scheduler picks the node with the devices)."""
    name = f"gpu-check-{flavor_slug}"
    template = claim_template(
        namespace=namespace,
        name=name,
        device_class=device_class,
        device_selector=device_selector,
        gpus=gpus,
    )
    return [
        template,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "ttlSecondsAfterFinished": 3600,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": {**POD_SECURITY, "runAsUser": 1000},
                        "tolerations": [dict(t) for t in tolerations],
                        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": name}],
                        "containers": [
                            {
                                "name": "main",
                                "image": EXAMPLE_IMAGE,
                                "command": ["nvidia-smi"],
                                "resources": {"claims": [{"name": "gpus"}]},
                                "securityContext": CONTAINER_SECURITY,
                            }
                        ],
                    }
                },
            },
        },
    ]


def user_kubeconfig(*, cluster_name, server, ca_data, issuer, client_id, scopes, namespace):
    """A kubeconfig for a team member: the cluster's API server, the team's namespace,
    and a token from the cluster's OIDC provider through the kubelogin plugin
    (`kubectl oidc-login`), which the API server trusts (--oidc-issuer-url)."""
    cluster = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    args = [
        "oidc-login",
        "get-token",
        f"--oidc-issuer-url={issuer}",
        f"--oidc-client-id={client_id}",
    ]
    args += [f"--oidc-extra-scope={scope}" for scope in scopes]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [
            {
                "name": f"{cluster_name}-oidc",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "kubectl",
                        "args": args,
                        "interactiveMode": "IfAvailable",
                    }
                },
            }
        ],
        "contexts": [
            {
                "name": namespace,
                "context": {
                    "cluster": cluster_name,
                    "user": f"{cluster_name}-oidc",
                    "namespace": namespace,
                },
            }
        ],
        "current-context": namespace,
    }
