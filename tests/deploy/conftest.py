"""The portal on kubesim as it runs in a cluster: kubesim authenticates and
authorizes every request (RBAC), and the portal (this process, and the workers)
talks to it as the ServiceAccount deploy/ creates, holding exactly the
ClusterRole deploy/ binds to it, both read from `kubectl kustomize deploy/base`.

`kubesim` and `cluster` here replace provisioning's: `cluster` is a cluster
admin's client, for looking at (and setting up) the cluster, never the portal's.
A test that parametrizes `portal_rules` runs the portal with other rules."""

import os
import tempfile

import pytest

from cluster import kube
from kubesim.testing import running_kubesim
from tests.deploy.test_kustomize import by_kind, render
from tests.provisioning.conftest import Sim


def deployed():
    """(ServiceAccount, ClusterRole, ClusterRoleBinding) as deploy/base renders them."""
    objects = render("deploy/base")
    (account,) = by_kind(objects, "ServiceAccount").values()
    (role,) = by_kind(objects, "ClusterRole").values()
    (binding,) = by_kind(objects, "ClusterRoleBinding").values()
    return account, role, binding


@pytest.fixture
def portal_rules():
    return deployed()[1]["rules"]


@pytest.fixture
def kubesim(settings, portal_rules):
    account, role, binding = deployed()
    with running_kubesim(auth=True) as sim:
        admin = kube.Cluster(kube.load_configuration(sim.kubeconfig_path), timeout=5)
        admin.call(
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            body={**role, "rules": portal_rules},
        )
        admin.call("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body=binding)
        admin.close()
        meta = account["metadata"]
        token = sim.auth.service_account_token(meta["namespace"], meta["name"])
        path = sim.write_kubeconfig(
            os.path.join(tempfile.mkdtemp(prefix="kubesim-portal-"), "kubeconfig"), token=token
        )
        settings.PORTAL_KUBECONFIG = path
        settings.PORTAL_KUBE_CONTEXT = None
        kube.reset()
        wrapper = Sim(sim)
        wrapper.kubeconfig = path  # what the workers are given
        wrapper.portal_user = f"system:serviceaccount:{meta['namespace']}:{meta['name']}"
        yield wrapper
        kube.reset()
        os.remove(path)
        os.rmdir(os.path.dirname(path))


@pytest.fixture
def cluster(kubesim):
    """A cluster admin's client (not the portal's)."""
    admin = kube.Cluster(kube.load_configuration(kubesim.sim.kubeconfig_path), timeout=5)
    yield admin
    admin.close()
