"""The cluster client against kubesim over HTTP: errors become our own exceptions."""

import socket

import pytest

from cluster import kube
from provisioning import manifests
from tests.clusters import CONTEXT


@pytest.fixture
def client(backend):
    """No retries in place, so each call shows the raw mapping of one response."""
    return kube.Cluster(kube.load_configuration(backend.kubeconfig), timeout=2, retries=0)


def test_it_applies_and_reads_back_a_plain_dict(client):
    client.apply(manifests.namespace("vision"), field_manager="gpu-portal")
    live = client.get("Namespace", "vision")
    assert live["metadata"]["labels"]["gpu-portal.io/team"] == "vision"


def test_a_missing_object_is_none(client):
    assert client.get("Namespace", "nowhere") is None
    assert client.delete("Namespace", "nowhere") is False


@pytest.mark.parametrize("status", [500, 503])
@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_server_errors_are_transient(client, backend, status):
    backend.faults(error_rate=1.0, statuses=[status])
    with pytest.raises(kube.TransientClusterError) as caught:
        client.get("Namespace", "default")
    assert caught.value.status == status


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_429_is_transient_and_carries_retry_after(client, backend):
    backend.faults(error_rate=1.0, statuses=[429], retry_after=7)
    with pytest.raises(kube.TransientClusterError) as caught:
        client.list("Node")
    assert caught.value.status == 429
    assert caught.value.retry_after == 7


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_a_timeout_is_transient(client, backend):
    backend.faults(latency_ms=3000)
    with pytest.raises(kube.TransientClusterError, match="Timeout"):
        client.get("Namespace", "default")


def test_a_refused_connection_is_transient():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    configuration = kube.k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = False
    with pytest.raises(kube.TransientClusterError):
        kube.Cluster(configuration, timeout=1, retries=0).get("Namespace", "default")


def test_an_invalid_object_is_permanent_with_the_servers_message(client):
    binding = manifests.role_binding("default", "vision", [], "edit")
    client.apply(binding, field_manager="gpu-portal")
    binding["subjects"] = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ""}]
    with pytest.raises(kube.PermanentClusterError) as caught:
        client.apply(binding, field_manager="gpu-portal")
    assert caught.value.status == 422
    assert "subjects[0].name: Required value" in caught.value.message


@pytest.mark.kubesim_only("injects API faults, which kubesim alone does")
def test_transient_errors_are_retried_in_place(backend):
    client = kube.Cluster(
        kube.load_configuration(backend.kubeconfig), timeout=2, retries=30, backoff=0.001
    )
    backend.faults(error_rate=0.5, statuses=[500, 503])
    for _ in range(10):
        assert client.get("Namespace", "default") is not None


def test_a_bad_kubeconfig_is_a_clear_error(tmp_path):
    with pytest.raises(kube.NotConfigured, match="No usable Kubernetes configuration"):
        kube.load_configuration(str(tmp_path / "missing"))


def test_a_named_context_is_used(backend):
    configuration = kube.load_configuration(backend.kubeconfig, context=CONTEXT)
    assert configuration.host == backend.url
