"""The Job builder: a pure function, compared and validated against the schemas."""

from datetime import UTC, datetime

import kubernetes_validate

from batch.manifests import batch_job, may_run_on
from cluster.inventory import node_selected

SPOT = "karpenter.sh/capacity-type=spot"


def build(**overrides):
    fields = {
        "job_id": 42,
        "namespace": "vision",
        "team_slug": "vision",
        "window_id": 3,
        "opens_at": datetime(2026, 12, 4, 22, tzinfo=UTC),
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "args": ["--epochs", "3"],
        "env": [
            {"name": "EPOCHS", "value": "3"},
            {"name": "HF_TOKEN", "secret": {"name": "hf", "key": "token"}},
        ],
        "resource_name": "nvidia.com/gpu",
        "gpus_per_pod": 2,
        "parallelism": 2,
        "completions": 4,
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "spot_allowed": False,
        "spot_label": SPOT,
    }
    return batch_job(**{**fields, **overrides})


def test_it_is_a_valid_suspended_job_with_a_fixed_name_and_portal_labels():
    job = build()
    kubernetes_validate.validate(job, "1.31", strict=True)
    assert job["metadata"]["name"] == "batch-42"
    assert job["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/batch-job": "42",
        "gpu-portal.io/batch-window": "3",
        "gpu-portal.io/batch-occurrence": "20261204T2200Z",
    }
    spec = job["spec"]
    assert spec["suspend"] is True
    assert spec["backoffLimit"] == 3
    assert "activeDeadlineSeconds" not in spec and "podFailurePolicy" not in spec
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert container["command"] == ["python", "train.py"]
    assert container["env"][1] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
    }


def test_it_is_admitted_by_pod_security_restricted():
    pod = build()["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_a_job_without_spot_is_kept_off_spot_nodes():
    pod = build()["spec"]["template"]["spec"]
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]}
    ]


def test_the_capacity_checks_keep_jobs_off_the_nodes_the_affinity_does():
    # Windows' and jobs' capacity counts nodes by may_run_on: the same nodes the
    # Job's required affinity admits, read by the inventory's NodeSelector rule.
    pod = build()["spec"]["template"]["spec"]
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for labels in (
        {},
        {"karpenter.sh/capacity-type": "spot"},
        {"karpenter.sh/capacity-type": "on-demand"},
        {"cloud.google.com/gke-spot": "true"},  # not the portal's label: not kept off
    ):
        node = {"metadata": {"name": "n", "labels": labels}}
        admitted = node_selected(node, required["nodeSelectorTerms"])
        assert may_run_on(labels, spot_allowed=False, spot_label=SPOT) == admitted, labels
        assert may_run_on(labels, spot_allowed=True, spot_label=SPOT)


def test_a_spot_job_tolerates_prefers_spot_and_ignores_disruptions():
    job = build(spot_allowed=True, suspend=False, active_deadline_seconds=3600)
    kubernetes_validate.validate(job, "1.31", strict=True)
    spec = job["spec"]
    assert spec["suspend"] is False
    assert spec["activeDeadlineSeconds"] == 3600
    assert spec["podFailurePolicy"] == {
        "rules": [
            {
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
        ]
    }
    pod = spec["template"]["spec"]
    assert {
        "key": "karpenter.sh/capacity-type",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["nodeAffinity"]


def test_the_same_input_gives_the_same_job():
    assert build() == build()


def test_a_dra_job_claims_its_devices_from_a_template_owned_by_the_job():
    from batch.manifests import batch_claim_template

    job = build(
        dra=True,
        resource_name="gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
        node_selector={},
        tolerations=[],
    )
    kubernetes_validate.validate(job, "1.37", strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "batch-42"}]
    (container,) = pod["containers"]
    assert container["resources"] == {"claims": [{"name": "gpus"}]}  # no extended resource
    assert pod["nodeSelector"] == {}

    template = batch_claim_template(
        job_id=42,
        namespace="vision",
        team_slug="vision",
        window_id=3,
        opens_at=datetime(2026, 12, 4, 22, tzinfo=UTC),
        device_class="gpu.nvidia.com",
        device_selector='device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
        gpus=2,
        owner_uid="0b6f-uid",
    )
    kubernetes_validate.validate(template, "1.37", strict=True)
    assert template["metadata"]["name"] == "batch-42"
    assert template["metadata"]["labels"] == job["metadata"]["labels"]
    assert template["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "batch-42", "uid": "0b6f-uid"}
    ]
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert request["exactly"]["count"] == 2
