"""Authentication and RBAC, when kubesim is started with them: bearer tokens, the
apiserver's 401 and 403 bodies word for word, rules evaluated as rbac/v1 defines
them, and escalation prevention on bindings. Through the official client and kubectl."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from kubesim.testing import running_kubesim
from tests.kubesim.apihelpers import status_body

SA = "system:serviceaccount:portal:gpu-portal"
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def sim():
    with running_kubesim(control_plane=False, auth=True) as sim:
        yield sim


def api_as(sim, token):
    configuration = client.Configuration()
    configuration.host = sim.url
    configuration.retries = 0
    if token:
        configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


@pytest.fixture
def admin(sim):
    return api_as(sim, sim.admin_token)


@pytest.fixture
def portal(sim):
    """The portal's ServiceAccount, bound to nothing yet."""
    return api_as(sim, portal_token(sim))


def raw(sim, token, method, path, body=None, *, content_type="application/json"):
    """(status, Status body) of one request made by hand."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(sim.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def portal_token(sim):
    return sim.auth.service_account_token("portal", "gpu-portal")


def refused(call, *args, **kwargs):
    with pytest.raises(client.ApiException) as error:
        call(*args, **kwargs)
    return error.value.status, status_body(error.value)


def grant(admin, rules, *, namespace=None, subject=None, name="grant"):
    """A (Cluster)Role with `rules` and a binding of it to the portal's ServiceAccount
    (a RoleBinding in `namespace`, else a ClusterRoleBinding)."""
    rbac = client.RbacAuthorizationV1Api(admin)
    subject = subject or {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "portal"}
    role = {"metadata": {"name": name}, "rules": rules}
    binding = {"metadata": {"name": name}, "subjects": [subject]}
    if namespace:
        rbac.create_namespaced_role(namespace, role)
        binding["roleRef"] = {"apiGroup": RBAC, "kind": "Role", "name": name}
        rbac.create_namespaced_role_binding(namespace, binding)
    else:
        rbac.create_cluster_role(role)
        binding["roleRef"] = {"apiGroup": RBAC, "kind": "ClusterRole", "name": name}
        rbac.create_cluster_role_binding(binding)


def namespace(admin, name):
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": name}})


def test_without_a_token_or_with_a_wrong_one_the_answer_is_401(sim):
    for token in (None, "not-a-token"):
        status, body = refused(client.CoreV1Api(api_as(sim, token)).list_namespace)
        assert status == 401
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }


def test_without_auth_kubesim_serves_anyone():
    with running_kubesim(control_plane=False) as sim:
        assert client.CoreV1Api(api_as(sim, None)).list_namespace().items


def test_a_service_account_with_no_binding_gets_the_apiservers_403(portal):
    status, body = refused(client.CoreV1Api(portal).list_namespaced_pod, "z")
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{SA}" cannot list resource "pods" in API group "" '
        'in the namespace "z"',
        "reason": "Forbidden",
        "details": {"kind": "pods"},
        "code": 403,
    }
    status, body = refused(client.BatchV1Api(portal).read_namespaced_job, "train", "vision")
    assert body["message"] == (
        f'jobs.batch "train" is forbidden: User "{SA}" cannot get resource "jobs" '
        'in API group "batch" in the namespace "vision"'
    )
    assert body["details"] == {"name": "train", "group": "batch", "kind": "jobs"}
    status, body = refused(client.CoreV1Api(portal).list_node)
    assert body["message"] == (
        f'nodes is forbidden: User "{SA}" cannot list resource "nodes" in API group "" '
        "at the cluster scope"
    )


def test_a_role_binding_grants_in_its_namespace_only(admin, portal):
    namespace(admin, "vision")
    namespace(admin, "nlp")
    grant(
        admin, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], namespace="vision"
    )
    core = client.CoreV1Api(portal)

    assert core.list_namespaced_pod("vision").items == []
    assert refused(core.list_namespaced_pod, "nlp")[0] == 403
    status, body = refused(core.list_pod_for_all_namespaces)  # a list across namespaces
    assert body["message"].endswith(
        'cannot list resource "pods" in API group "" at the cluster scope'
    )
    assert refused(core.read_namespaced_pod, "x", "vision")[0] == 403  # get is another verb


def test_a_cluster_role_binding_grants_everywhere_and_star_matches_any_verb(admin, portal):
    namespace(admin, "nlp")
    grant(admin, [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]}])
    batch = client.BatchV1Api(portal)
    job = {
        "metadata": {"name": "train"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "m", "image": "busybox", "command": ["true"]}],
                }
            }
        },
    }
    batch.create_namespaced_job("nlp", job)
    assert [j.metadata.name for j in batch.list_job_for_all_namespaces().items] == ["train"]
    batch.delete_namespaced_job("train", "nlp")
    # The core group is another group: jobs' rule says nothing about pods.
    assert refused(client.CoreV1Api(portal).list_namespaced_pod, "nlp")[0] == 403


def test_a_subresource_needs_its_own_rule(admin, portal):
    grant(
        admin,
        [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": ["batch"], "resources": ["*/status"], "verbs": ["get"]},
        ],
    )
    client.CoreV1Api(admin).create_namespaced_pod(
        "default",
        {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    core = client.CoreV1Api(portal)
    assert core.read_namespaced_pod("web", "default").metadata.name == "web"
    status, body = refused(core.read_namespaced_pod_log, "web", "default")
    assert body["message"] == (
        f'pods "web" is forbidden: User "{SA}" cannot get resource "pods/log" in API group "" '
        'in the namespace "default"'
    )
    assert body["details"] == {"name": "web", "kind": "pods"}
    # `*/status` in group batch: a Job's status, not the Job (404: allowed, not there).
    batch = client.BatchV1Api(portal)
    assert refused(batch.read_namespaced_job_status, "none", "default")[0] == 404
    assert refused(batch.read_namespaced_job, "none", "default")[0] == 403


def test_resource_names_limit_a_rule_to_those_objects(admin, portal):
    namespace(admin, "vision")
    namespace(admin, "nlp")
    grant(
        admin,
        [
            {
                "apiGroups": [""],
                "resources": ["namespaces"],
                "verbs": ["get"],
                "resourceNames": ["vision"],
            }
        ],
    )
    core = client.CoreV1Api(portal)
    assert core.read_namespace("vision").metadata.name == "vision"
    status, body = refused(core.read_namespace, "nlp")
    # A namespace's own URL is in that namespace, as the apiserver's RequestInfo says.
    assert body["message"] == (
        f'namespaces "nlp" is forbidden: User "{SA}" cannot get resource "namespaces" '
        'in API group "" in the namespace "nlp"'
    )
    assert refused(core.list_namespace)[0] == 403  # a list names nothing


def test_groups_of_service_accounts_and_of_everyone_authenticated(sim, admin, portal):
    other = api_as(sim, sim.auth.service_account_token("ci", "runner"))
    person = api_as(sim, sim.auth.add_token("alice-token", "alice", groups=["devs"]))
    nodes = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    grant(admin, nodes, subject={"kind": "Group", "name": "system:serviceaccounts"}, name="sa")

    client.CoreV1Api(portal).list_node()
    client.CoreV1Api(other).list_node()
    assert refused(client.CoreV1Api(person).list_node)[0] == 403

    events = [{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
    grant(admin, events, subject={"kind": "Group", "name": "system:authenticated"}, name="all")
    client.CoreV1Api(person).list_event_for_all_namespaces()


def test_a_non_resource_path_is_authorized_by_url(sim, portal):
    assert client.VersionApi(portal).get_code().major == "1"  # system:public-info-viewer
    client.CoreApi(portal).get_api_versions()  # system:discovery
    status, body = raw(sim, portal_token(sim), "GET", "/logs/")
    assert status == 403
    assert body["message"] == f'forbidden: User "{SA}" cannot get path "/logs/"'
    assert body["details"] == {}


def test_a_binding_to_a_missing_role_says_so_in_the_reason(admin, portal):
    binding = {
        "metadata": {"name": "dangling"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "gone"},
        "subjects": [{"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "portal"}],
    }
    client.RbacAuthorizationV1Api(admin).create_cluster_role_binding(binding)
    status, body = refused(client.CoreV1Api(portal).list_node)
    assert body["message"].endswith(
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'
    )


def test_server_side_apply_that_creates_needs_create_too(sim, admin, portal):
    grant(admin, [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}])
    core = client.CoreV1Api(portal)
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}}
    status, error = raw(
        sim,
        portal.configuration.api_key["authorization"].split()[1],
        "PATCH",
        "/api/v1/namespaces/vision?fieldManager=portal",
        body,
        content_type="application/apply-patch+yaml",
    )
    assert (status, error["message"]) == (403, 'namespaces "vision" is forbidden: ')
    namespace(admin, "vision")  # there already: patch is enough
    core.patch_namespace("vision", {"metadata": {"labels": {"team": "vision"}}})


def test_granting_a_role_needs_bind_on_it_or_all_its_rights(sim, admin, portal):
    namespace(admin, "vision")
    may_bind = [{"apiGroups": [RBAC], "resources": ["rolebindings"], "verbs": ["create"]}]
    grant(admin, may_bind, name="binder")
    rbac = client.RbacAuthorizationV1Api(portal)
    binding = {
        "metadata": {"name": "team"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "gpu-team-vision"}],
    }
    status, body = refused(rbac.create_namespaced_role_binding, "vision", binding)
    assert status == 403
    assert body["message"].startswith(
        f'rolebindings.{RBAC} "team" is forbidden: user "{SA}" (groups=["system:serviceaccounts" '
        '"system:serviceaccounts:portal" "system:authenticated"]) is attempting to grant RBAC '
        "permissions not currently held:\n"
        '{APIGroups:[""], Resources:["events"], Verbs:["get" "list" "watch"]}\n'
    )
    assert (
        '{APIGroups:["batch"], Resources:["jobs"], Verbs:["get" "list" "watch"]}' in body["message"]
    )

    bind_view = {
        "apiGroups": [RBAC],
        "resources": ["clusterroles"],
        "verbs": ["bind"],
        "resourceNames": ["view"],
    }
    grant(admin, [bind_view], name="bind-view")
    rbac.create_namespaced_role_binding("vision", binding)
    edit = {
        **binding,
        "metadata": {"name": "edit"},
        "roleRef": {**binding["roleRef"], "name": "edit"},
    }
    assert refused(rbac.create_namespaced_role_binding, "vision", edit)[0] == 403


def test_tokens_from_a_token_file(tmp_path):
    """The format of kube-apiserver's --token-auth-file. (kubectl sends no credentials
    to a plain-HTTP server, so it cannot be the client here: kubesim has no TLS.)"""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('ops-token,ops,1001,"ops,system:masters"\nbob-token,bob,1002\n')
    with running_kubesim(control_plane=False, token_auth_file=str(tokens)) as sim:
        assert client.CoreV1Api(api_as(sim, "ops-token")).list_namespace().items
        status, body = refused(client.CoreV1Api(api_as(sim, "bob-token")).list_namespaced_pod, "x")
        assert body["message"].startswith('pods is forbidden: User "bob" cannot list')
        assert refused(client.CoreV1Api(api_as(sim, "nobody")).list_namespace)[0] == 401


def test_a_token_file_with_too_few_columns_is_refused(tmp_path):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("only-a-token,ops\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--bare",
            "--port",
            "0",
            "--token-auth-file",
            str(tokens),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 2
    assert "must have at least 3 columns (token, user name, user uid), found 2" in result.stderr


def test_a_self_subject_access_review_says_what_the_caller_may_do(sim, admin, portal):
    namespace(admin, "vision")
    grant(
        admin,
        [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
        namespace="vision",
    )
    reviews = client.AuthorizationV1Api(portal)

    def may(**attributes):
        review = {"spec": {"resourceAttributes": attributes}}
        return reviews.create_self_subject_access_review(review).status.allowed

    assert may(namespace="vision", verb="get", resource="pods", subresource="log") is True
    assert may(namespace="nlp", verb="get", resource="pods", subresource="log") is False
    assert may(namespace="vision", verb="get", resource="pods") is False
    path = {"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}}
    assert reviews.create_self_subject_access_review(path).status.allowed is True
    status, body = raw(sim, portal_token(sim), "POST", RBAC_REVIEWS, {"spec": {}})
    assert status == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes" in body["message"]


RBAC_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def test_kubectl_over_tls_with_a_service_account_token(tmp_path):
    if not KUBECTL.exists():
        pytest.skip("kubectl wheel not installed")
    with running_kubesim(control_plane=False, auth=True, tls=True) as sim:
        assert sim.url.startswith("https://")
        admin_api = client.ApiClient(kube_configuration(sim.kubeconfig_path))
        namespace(admin_api, "vision")
        grant(
            admin_api,
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            namespace="vision",
        )
        portal = sim.write_kubeconfig(str(tmp_path / "portal"), token=portal_token(sim))

        def kubectl(*args):
            command = [str(KUBECTL), "--kubeconfig", portal, *args]
            return subprocess.run(command, capture_output=True, text=True, timeout=30)

        assert kubectl("get", "pods", "-n", "vision").returncode == 0
        denied = kubectl("get", "jobs", "-n", "vision")
        assert denied.returncode == 1
        assert denied.stderr.strip() == (
            f'Error from server (Forbidden): jobs.batch is forbidden: User "{SA}" cannot list '
            'resource "jobs" in API group "batch" in the namespace "vision"'
        )
        assert kubectl("auth", "can-i", "list", "pods", "-n", "vision").stdout.strip() == "yes"
        cannot = kubectl("auth", "can-i", "delete", "pods", "-n", "vision")
        assert (cannot.returncode, cannot.stdout.strip()) == (1, "no")


def kube_configuration(path):
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=configuration)
    return configuration


KUBECTL = Path(sys.executable).parent / "kubectl"
