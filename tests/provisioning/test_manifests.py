"""Manifest builders: pure functions compared by output and validated against the
Kubernetes schemas of the oldest and newest versions we support."""

import kubernetes_validate
import pytest

from provisioning import manifests, policies

SUPPORTED_VERSIONS = ["1.30", kubernetes_validate.latest_version().rsplit(".", 1)[0]]

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}


def all_objects():
    return manifests.team_objects(
        team_slug="vision",
        prefix="team-",
        gpus_by_resource={"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 0},
        subjects=manifests.group_subjects(["gpu-team-vision"]),
        cluster_role="edit",
    )


def test_it_names_the_namespace_after_the_team():
    assert manifests.namespace("vision", "team-") == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-vision",
            "labels": {
                **LABELS,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


def test_it_caps_gpus_under_the_requests_prefix_with_explicit_zeros():
    quota = manifests.resource_quota(
        "vision", "vision", {"nvidia.com/gpu": 4, "nvidia.com/a100": 0}
    )
    assert quota == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "vision", "labels": LABELS},
        "spec": {"hard": {"requests.nvidia.com/a100": "0", "requests.nvidia.com/gpu": "4"}},
    }


def test_it_gives_default_container_requests():
    assert manifests.limit_range("vision", "vision")["spec"] == {
        "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]
    }


def test_it_binds_the_team_group_to_a_cluster_role_in_its_namespace_only():
    binding = manifests.role_binding(
        "vision", "vision", manifests.group_subjects(["gpu-team-vision"]), "edit"
    )
    assert binding == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "gpu-portal-team", "namespace": "vision", "labels": LABELS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "gpu-team-vision"}
        ],
    }


def test_it_lists_users_sorted_and_once():
    assert [s["name"] for s in manifests.user_subjects(["oidc:bob", "oidc:alice", "oidc:bob"])] == [
        "oidc:alice",
        "oidc:bob",
    ]


def test_it_denies_all_ingress():
    assert manifests.network_policy("vision", "vision")["spec"] == {
        "podSelector": {},
        "policyTypes": ["Ingress"],
    }


def test_it_builds_the_namespace_first_and_everything_in_it():
    objects = all_objects()
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "RoleBinding",
        "NetworkPolicy",
    ]
    assert {o["metadata"].get("namespace") for o in objects[1:]} == {"team-vision"}


def test_it_is_deterministic():
    assert all_objects() == all_objects()


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_object_is_valid_kubernetes(version):
    for obj in all_objects():
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_a_binding_without_subjects_is_valid(version):
    binding = manifests.role_binding("vision", "vision", [], "edit")
    kubernetes_validate.validate(binding, version, strict=True)


def example():
    return manifests.example_job(
        namespace="vision",
        flavor_slug="a100-1g",
        resource_name="nvidia.com/mig-1g.10gb",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )


def test_the_example_job_keeps_to_its_flavor_and_asks_by_limits():
    pod = example()["spec"]["template"]["spec"]
    assert example()["metadata"] == {"name": "gpu-check-a100-1g", "namespace": "vision"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (container,) = pod["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    # What the namespace's `restricted` Pod Security demands.
    assert container["securityContext"] == manifests.CONTAINER_SECURITY
    assert pod["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_example_job_is_valid_kubernetes(version):
    kubernetes_validate.validate(example(), version, strict=True)


def test_a_device_class_is_capped_under_its_own_key_beside_extended_resources():
    hard = manifests.quota_hard(
        {"nvidia.com/gpu": 4, "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2}
    )
    # No `requests.` before a DeviceClass's key: Kubernetes accepts that spelling
    # and never enforces it (docs/dra-findings.md).
    assert hard == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
        "requests.nvidia.com/gpu": "4",
    }


H100_ONLY = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


def dra_example():
    return manifests.example_dra_job(
        namespace="vision",
        flavor_slug="h100-dra",
        device_class="gpu.nvidia.com",
        device_selector=H100_ONLY,
        tolerations=[],
    )


def test_the_dra_example_claims_its_flavors_devices_from_a_template():
    template, job = dra_example()
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "gpus",
            "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [
                    {
                        "cel": {
                            "expression": 'device.attributes["gpu.nvidia.com"].productName'
                            ' == "NVIDIA H100 80GB HBM3"'
                        }
                    }
                ],
            },
        }
    ]
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": "gpu-check-h100-dra"}
    ]
    (container,) = pod["containers"]
    assert container["resources"] == {"claims": [{"name": "gpus"}]}
    assert "nodeSelector" not in pod


def test_the_dra_example_is_valid_kubernetes():
    # resource.k8s.io/v1 is in the schemas from 1.34 (GA) on.
    for obj in dra_example():
        kubernetes_validate.validate(obj, SUPPORTED_VERSIONS[-1], strict=True)


# --- the GPU flavor admission policies (provisioning/policies.py) ---

POLICY_FLAVORS = [
    policies.PolicyFlavor.of("h100", "H100", "nvidia.com/gpu", {"gpu": "h100"}),
    policies.PolicyFlavor.of("t4-", "T4", "nvidia.com/gpu", {"gpu": "t4"}),
    policies.PolicyFlavor.of("mig", "MIG 1g", "nvidia.com/mig-1g.10gb", {"gpu": "a100"}),
]


def test_the_policies_are_valid_kubernetes():
    objects = policies.team_policies(POLICY_FLAVORS, "vision", "", request_url="https://p/new/")
    assert [o["kind"] for o in objects] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ]
    for obj in objects:
        # MutatingAdmissionPolicy's v1 schema is 1.36's; the validating one is 1.30's.
        kubernetes_validate.validate(obj, SUPPORTED_VERSIONS[-1], strict=True)
    quota = manifests.resource_quota(
        "vision",
        "vision",
        {"nvidia.com/gpu": 3},
        policies.holdings_annotations(POLICY_FLAVORS, {"h100": 1, "t4-": 2}),
    )
    kubernetes_validate.validate(quota, SUPPORTED_VERSIONS[-1], strict=True)
    assert quota["metadata"]["annotations"] == {
        "gpu-portal.io/gpus.h100": "1",
        "gpu-portal.io/gpus.mig": "0",
        "gpu-portal.io/gpus.t4-0": "2",
    }


def test_only_a_shared_resource_name_needs_a_flavor_chosen():
    policy = policies.validating_policy(POLICY_FLAVORS, request_url="https://p/new/")
    pinned = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert pinned["pinned_f_mig"] == "true"  # its resource name is its flavor
    assert "variables.selector" in pinned["pinned_f_h100"]
    # One "choose a flavor" rule for nvidia.com/gpu, one "at most what is held" per flavor.
    assert len(policy["spec"]["validations"]) == 1 + 3


def test_no_policies_without_a_flavor_they_could_tell_apart():
    assert policies.team_policies([], "vision", "", request_url="https://p/new/") == []


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_budgets_quota_is_valid_kubernetes_and_names_the_budget(version):
    quota = manifests.budget_quota(
        "vision", "vision", {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 0}
    )
    kubernetes_validate.validate(quota, version, strict=True)
    assert quota["metadata"]["name"] == manifests.BUDGET_QUOTA_NAME == "gpu-budget-spent"
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/mig-1g.10gb": "0",
    }
    assert quota["metadata"]["labels"][manifests.TEAM_LABEL] == "vision"
