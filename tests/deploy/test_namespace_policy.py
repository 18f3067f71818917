"""deploy/'s ValidatingAdmissionPolicy on the real API server: what RBAC cannot
say (only the namespaces labelled as the portal's), the API server enforces on
the portal's ServiceAccount, whatever the portal itself would send.

The portal's requests here go out without its client's own guard
(`kube.Cluster(..., reserved=None)`), as a portal with a bug or a forged
database row would send them: the server refuses them. With the policy in force
the portal's whole life still passes (tests/deploy/test_least_privilege.py).
"""

import pytest

from cluster import kube
from tests.clusters import admission_policy

pytestmark = pytest.mark.kubernetes_only("kubesim has no admission policies")

OURS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}
MERGE_PATCH = "application/merge-patch+json"


@pytest.fixture
def portal(backend, namespace_policy):
    """The portal's ServiceAccount, sending what it is told to."""
    client = kube.Cluster(kube.load_configuration(backend.kubeconfig), timeout=10)
    yield client
    client.close()


def make(cluster, name, labels=None):
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        field_manager="someone-else",
    )


def quota(namespace):
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": namespace, "labels": OURS},
        "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
    }


def relabel(client, name, labels):
    return client.call(
        "PATCH",
        client.path("Namespace", name),
        body={"metadata": {"labels": labels}},
        content_type=MERGE_PATCH,
    )


def refused(call, why):
    """`call` answered 403 by the policy with `why` (or, `why` empty, by anything)."""
    with pytest.raises(kube.PermanentClusterError) as raised:
        call()
    assert raised.value.status == 403
    if why:
        assert "ValidatingAdmissionPolicy 'gpu-portal-namespaces'" in raised.value.message
        assert why in raised.value.message
    return raised.value.message


def test_the_portal_cannot_delete_relabel_or_write_into_a_namespace_it_did_not_make(
    portal, cluster
):
    make(cluster, "someone", {"owner": "data-platform"})
    refused(
        lambda: portal.delete("Namespace", "someone"),
        "changes or deletes only namespaces labelled app.kubernetes.io/managed-by=gpu-portal; "
        "someone is not",
    )
    refused(lambda: relabel(portal, "someone", OURS), "someone is not")
    refused(
        lambda: portal.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "someone", "labels": OURS},
            },
            field_manager="gpu-portal",
        ),
        "someone is not",
    )
    refused(
        lambda: portal.apply(quota("someone"), field_manager="gpu-portal"),
        "writes only into namespaces labelled app.kubernetes.io/managed-by=gpu-portal; "
        "someone is not",
    )
    live = cluster.get("Namespace", "someone")
    assert not live["metadata"].get("deletionTimestamp")
    assert live["metadata"]["labels"]["owner"] == "data-platform"
    assert "app.kubernetes.io/managed-by" not in live["metadata"]["labels"]
    assert cluster.get("ResourceQuota", "gpu-quota", "someone") is None
    # The policy binds the portal alone: a cluster admin does as they please.
    relabel(cluster, "someone", OURS)
    assert cluster.delete("Namespace", "someone")


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-node-lease", "portal"])
def test_system_namespaces_and_its_own_are_refused_even_labelled_as_the_portals(
    portal, cluster, name
):
    relabel(cluster, name, OURS)  # as a careless admin might
    try:
        why = f"never writes to namespace {name}"
        refused(lambda: relabel(portal, name, {"x": "y"}), why)
        refused(lambda: portal.apply(quota(name), field_manager="gpu-portal"), why)
        # Dry run (admission decides all the same): were it let through, the session's
        # control plane would lose a namespace it needs.
        refused(
            lambda: portal.call(
                "DELETE",
                portal.path("Namespace", name),
                query={"dryRun": "All"},
                body={"propagationPolicy": "Background"},
                content_type="application/json",
            ),
            # `default`, `kube-system` and `kube-public` are immortal too: NamespaceLifecycle,
            # which runs first, may say so instead.
            why if name in ("portal", "kube-node-lease") else "",
        )
    finally:
        relabel(cluster, name, dict.fromkeys(OURS))
    assert not cluster.get("Namespace", name)["metadata"].get("deletionTimestamp")


def test_the_portal_keeps_its_label_on_the_namespaces_it_makes(portal, cluster):
    refused(
        lambda: portal.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "unlabelled"}},
            field_manager="gpu-portal",
        ),
        "keeps the label app.kubernetes.io/managed-by=gpu-portal on namespace unlabelled",
    )
    assert cluster.get("Namespace", "unlabelled") is None
    portal.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine", "labels": OURS}},
        field_manager="gpu-portal",
    )
    refused(
        lambda: relabel(portal, "mine", {"app.kubernetes.io/managed-by": None}),
        "keeps the label",
    )


def test_in_its_own_namespaces_the_portal_does_its_work(portal, cluster):
    portal.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x", "labels": OURS}},
        field_manager="gpu-portal",
    )
    portal.apply(quota("team-x"), field_manager="gpu-portal")
    relabel(portal, "team-x", {"pod-security.kubernetes.io/enforce": "restricted"})
    assert cluster.get("ResourceQuota", "gpu-quota", "team-x") is not None
    assert portal.delete("Namespace", "team-x")


def test_rbac_alone_lets_the_portal_delete_any_namespace(portal):
    """What the policy is for: RBAC cannot narrow `delete` on namespaces to the
    portal's (resourceNames are exact names), so the role allows it on every one."""
    review = portal.call(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {"verb": "delete", "resource": "namespaces", "name": "x"}
            },
        },
        content_type="application/json",
    )
    assert review["status"]["allowed"] is True


def test_it_is_the_policy_deploy_renders():
    policy, binding = admission_policy()
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == "gpu-portal-namespaces"
