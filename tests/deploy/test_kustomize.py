"""deploy/: the kustomize base and the example overlay render (with kubectl's
kustomize), every object is valid for the Kubernetes versions we support, and
the shape an operator relies on holds (one beat, probes, non-root)."""

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).with_name("kubectl")
VERSIONS = ["1.30", kubernetes_validate.latest_version().rsplit(".", 1)[0]]
TREES = ["deploy/base", "deploy/overlays/example"]


def render(tree):
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(ROOT / tree)], capture_output=True, text=True, check=True
    )
    return list(yaml.safe_load_all(result.stdout))


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("tree", TREES)
def test_every_object_is_valid(tree, version):
    objects = render(tree)
    assert {o["kind"] for o in objects} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "Ingress",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


# Resources with no namespace the portal may be granted a write of.
CLUSTER_SCOPED_RESOURCES = {
    "clusterroles",
    "clusterrolebindings",
    "nodes",
    "deviceclasses",
    "resourceslices",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.parametrize("tree", TREES)
def test_cluster_scoped_objects_carry_no_namespace(tree):
    """kustomize gives every kind it does not know as cluster-scoped the base's
    namespace; the base takes it off the admission policy's again."""
    for obj in render(tree):
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], obj["kind"]


@pytest.mark.parametrize("tree", TREES)
def test_the_deployments_run_as_the_portal_would(tree):
    objects = render(tree)
    deployments = by_kind(objects, "Deployment")
    assert set(deployments) == {"gpu-portal-web", "gpu-portal-worker", "gpu-portal-beat"}
    beat = deployments["gpu-portal-beat"]["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}  # never two during a rollout
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "gpu-portal"
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert {"configMapRef", "secretRef"} <= {k for ref in container["envFrom"] for k in ref}
            # Its own namespace, whatever the overlay makes it: never a team's.
            assert {
                "name": "PORTAL_OWN_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            } in container["env"]
    web = deployments["gpu-portal-web"]["spec"]["template"]["spec"]
    [server] = web["containers"]
    assert server["command"] == ["gunicorn", "portal.wsgi:application"]
    assert server["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert server["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["initContainers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    binding = by_kind(objects, "ClusterRoleBinding")["gpu-portal"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "portal"}
    ]


def test_the_overlay_sets_image_host_and_settings():
    objects = render("deploy/overlays/example")
    web = by_kind(objects, "Deployment")["gpu-portal-web"]
    assert web["spec"]["replicas"] == 3
    image = web["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.internal.example.org/platform/gpu-portal:1.0.0"
    assert by_kind(objects, "Ingress")["gpu-portal"]["spec"]["rules"][0]["host"] == (
        "gpu.internal.example.org"
    )
    [config] = by_kind(objects, "ConfigMap").values()
    assert config["data"]["PORTAL_HTTPS"] == "true"
    assert config["data"]["DJANGO_ALLOWED_HOSTS"] == "gpu.internal.example.org"


def test_the_cluster_role_grants_bind_on_edit_only():
    role = by_kind(render("deploy/base"), "ClusterRole")["gpu-portal"]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
    [bind] = [rule for rule in role["rules"] if "bind" in rule["verbs"]]
    assert bind == {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "verbs": ["bind"],
        "resourceNames": ["edit"],
    }


@pytest.mark.parametrize("tree", TREES)
def test_the_admission_policy_binds_and_matches_the_portals_service_account(tree):
    """The policy that keeps the portal to its own namespaces is bound (Deny), and
    its match condition names the ServiceAccount the ClusterRoleBinding grants the
    role to (the condition is CEL: kustomize's namespace does not reach into it).
    tests/deploy/test_namespace_policy.py proves what the API server does with it."""
    objects = render(tree)
    (policy,) = by_kind(objects, "ValidatingAdmissionPolicy").values()
    (binding,) = by_kind(objects, "ValidatingAdmissionPolicyBinding").values()
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy["spec"]["failurePolicy"] == "Fail"
    [subject] = by_kind(objects, "ClusterRoleBinding")["gpu-portal"]["subjects"]
    assert subject["kind"] == "ServiceAccount"
    [condition] = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        "request.userInfo.username.startsWith('system:serviceaccount:') && "
        f"request.userInfo.username.endsWith(':{subject['name']}')"
    )
    # Namespaces, and every namespaced resource the ClusterRole lets the portal
    # write, are watched by the policy (cluster-scoped ones are not in a namespace).
    role = by_kind(objects, "ClusterRole")["gpu-portal"]
    writes = {"create", "patch", "update", "delete"}
    written = {
        (group, resource)
        for rule in role["rules"]
        if writes & set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if resource not in CLUSTER_SCOPED_RESOURCES
    }
    watched = {
        (group, resource)
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        if set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert ("", "namespaces") in written
    assert written <= watched, written - watched
