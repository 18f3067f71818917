import pytest
from kubernetes import client

from kubesim.testing import api_client, running_kubesim


@pytest.fixture
def kubesim():
    """A bare API server: no controllers write behind the test's back."""
    with running_kubesim(control_plane=False) as sim:
        yield sim


@pytest.fixture
def kubesim_cluster():
    """The demo cluster with its control plane running (nodes, scheduler, job controller)."""
    with running_kubesim() as sim:
        yield sim


@pytest.fixture
def api(kubesim):
    with api_client(kubesim) as api:
        yield api


@pytest.fixture
def core(api):
    return client.CoreV1Api(api)


@pytest.fixture
def batch(api):
    return client.BatchV1Api(api)


@pytest.fixture
def rbac(api):
    return client.RbacAuthorizationV1Api(api)


@pytest.fixture
def networking(api):
    return client.NetworkingV1Api(api)
