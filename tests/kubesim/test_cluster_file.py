"""Cluster file -> Node objects: the demo catalog, GFD labels, strict client parsing."""

from collections import Counter

import pytest
import yaml

from kubesim import cluster
from kubesim.cluster import DEFAULT_CLUSTER
from kubesim.testing import running_kubesim
from tests.kubesim.simhelpers import Clients


def capacity_totals(nodes) -> Counter:
    totals = Counter()
    for node in nodes:
        for name, value in node["status"]["capacity"].items():
            if name.startswith("nvidia.com/"):
                totals[(node["metadata"]["labels"]["nvidia.com/gpu.product"], name)] += int(value)
    return totals


def test_the_demo_cluster_matches_the_portal_catalog():
    nodes = cluster.build_nodes(cluster.load(DEFAULT_CLUSTER))
    assert capacity_totals(nodes) == {
        ("NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu"): 16,
        ("NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu"): 16,
        ("NVIDIA-L4", "nvidia.com/gpu"): 24,
        ("Tesla-T4", "nvidia.com/gpu"): 8,
        ("NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-3g.40gb"): 14,
        ("NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-1g.10gb"): 28,
    }
    # Whole A100s and MIG A100s live on different nodes.
    for node in nodes:
        capacity = node["status"]["capacity"]
        assert not ("nvidia.com/gpu" in capacity and "nvidia.com/mig-1g.10gb" in capacity)
    cpu_only = [n for n in nodes if "nvidia.com/gpu.present" not in n["metadata"]["labels"]]
    assert len(cpu_only) == 2 and all("taints" not in n["spec"] for n in cpu_only)


def test_gpu_nodes_carry_gfd_labels_taints_and_spot_marks():
    nodes = {n["metadata"]["name"]: n for n in cluster.build_nodes(cluster.load(DEFAULT_CLUSTER))}
    h100 = nodes["gpu-h100-0"]
    labels = h100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert labels["nvidia.com/mig.strategy"] == "none"
    assert h100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert "karpenter.sh/capacity-type" not in labels
    assert nodes["gpu-l4-2"]["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"

    mig = nodes["gpu-a100-mig1g-0"]["metadata"]["labels"]
    assert mig["nvidia.com/mig.strategy"] == "mixed"
    assert mig["nvidia.com/mig.config"] == "all-1g.10gb"
    assert mig["nvidia.com/mig-1g.10gb.count"] == "28"
    assert nodes["gpu-a100-mig1g-0"]["status"]["allocatable"] == {
        "cpu": "48",
        "memory": "680Gi",
        "pods": "110",
        "ephemeral-storage": "500Gi",
        "nvidia.com/mig-1g.10gb": "28",
    }


def test_mig_devices_spread_over_physical_gpus():
    node = cluster.build_nodes(cluster.load(DEFAULT_CLUSTER))
    node = next(n for n in node if n["metadata"]["name"] == "gpu-a100-mig1g-0")
    devices = cluster.node_devices(node)
    assert Counter(d.gpu for d in devices) == {0: 7, 1: 7, 2: 7, 3: 7}
    assert [d.gpu_instance_id for d in devices if d.gpu == 1] == [1, 2, 3, 4, 5, 6, 7]
    assert len({d.uuid for d in devices}) == 4  # instances report their parent GPU


@pytest.mark.parametrize(
    "text, error",
    [
        ("nodePools: []", "non-empty nodePools"),
        ("nodePools: [{name: a, gpu: {model: V100}}]", "unknown gpu.model 'V100'"),
        ("nodePools: [{name: a}, {name: a}]", "unique name"),
        ("nodePools: [{name: a, gpu: {model: L4, mig: {config: nope}}}]", "known config"),
        ("nodePools: [{name: a, spot: true, reclaimRatePerHour: -1}]", "reclaimRatePerHour"),
        ("nodePools: [{name: a, spot: true, reclaimGraceSeconds: soon}]", "reclaimGrace"),
        ("nodePools: [{name: a, spot: true, reclaimMode: nuke}]", "eviction or shutdown"),
        ("nodePools: [{name: a, reclaimRatePerHour: 1}]", "needs spot: true"),
    ],
)
def test_bad_cluster_files_are_refused_with_a_reason(text, error):
    with pytest.raises(cluster.ClusterFileError, match=error):
        cluster.validate(yaml.safe_load(text))


def test_the_strict_client_parses_every_node_over_http(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "nodePools:\n"
        "  - {name: gpu, count: 2, gpu: {model: T4, count: 4}, labels: {team: vision}}\n"
        "  - {name: cordoned, unschedulable: true, taints: []}\n"
    )
    with running_kubesim(str(path)) as sim:
        nodes = Clients(sim).core.list_node().items
    names = [n.metadata.name for n in nodes]
    assert names == ["cordoned-0", "gpu-0", "gpu-1"]
    gpu = nodes[1]
    assert gpu.status.allocatable["nvidia.com/gpu"] == "4"
    assert gpu.metadata.labels["team"] == "vision"
    assert gpu.status.node_info.kubelet_version == cluster.DEFAULT_KUBELET_VERSION
    assert {c.type: c.status for c in gpu.status.conditions}["Ready"] == "True"
    assert nodes[0].spec.unschedulable
    # The node lifecycle controller taints a cordoned node.
    assert [(t.key, t.effect) for t in nodes[0].spec.taints] == [
        ("node.kubernetes.io/unschedulable", "NoSchedule")
    ]
