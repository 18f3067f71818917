"""The two cluster backends the cluster-facing tests run on, behind one face.

- `kubesim`: the simulator, started per test (fast; its clock can be moved).
- `kubernetes`: the real control plane of controlplane/ (etcd, kube-apiserver,
  the controller manager, the scheduler, KWOK GPU nodes), started once per
  session and put back as it was after each test: every namespace a test made
  is deleted and waited for, nodes are restored.

A test asks for `backend` and never asks which it has. What differs is said
once here: time passes on kubesim when the test moves its clock, on the real
cluster by itself (so `pass_time` moves kubesim's clock and lets a real one
run; durations in tests are real-time-short); the request log is kubesim's own
on one and the API server's audit log on the other; fault injection is
kubesim's alone (tests that need it are marked `kubesim_only`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from cluster import kube
from controlplane import nodes as kwok_nodes
from controlplane.binaries import missing
from controlplane.runner import METHOD_OF_VERB, ControlPlane
from kubesim.kubeconfig import kubeconfig
from kubesim.testing import running_kubesim
from tests.deploy.test_kustomize import by_kind, render
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("kubesim", "kubernetes")
ESCALATION = "is attempting to grant RBAC permissions not currently held"
# responsewriters.forbiddenMessage, for a resource request.
REFUSED = re.compile(
    r'User "[^"]*" cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)" in API group '
    r'"(?P<group>[^"]*)"(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)'
)
# The registry's check that who writes an admission policy (or its binding) may read
# its parameters: refused as 422 Invalid, not 403 (pkg/registry/admissionregistration).
PARAM_READ = re.compile(
    r'must have "get" permission on all objects of the referenced paramKind \(kind=(?P<kind>\w+)'
    r'|does not have "get" permission on the object referenced by paramRef'
)
CONTEXT = "gpu-portal"  # the context of the kubeconfigs written for the portal and users
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


class Backend:
    """What both backends offer the tests."""

    name = ""
    url = ""
    admin_kubeconfig = ""  # a cluster admin's
    kubeconfig = ""  # the portal's (its ServiceAccount), once `as_portal` ran
    portal_user = ""
    admin_user = ""  # who the admin kubeconfig is: the tests' own reads

    def writes(self):
        return [r for r in self.requests() if r["method"] in ("POST", "PUT", "PATCH", "DELETE")]

    def pass_time(self, seconds: float):
        """Let `seconds` of cluster time pass (kubesim: its clock moves at once)."""

    def portal_kubeconfig(self, token: str, path: Path) -> str:
        config = kubeconfig(self.url, context=CONTEXT, token=token, ca_pem=self.ca_pem)
        path.write_text(yaml.safe_dump(config))
        return str(path)


class KubesimBackend(Backend):
    """kubesim's admin API (/_sim/), as the tests use it."""

    name = "kubesim"
    admin_user = "kubesim-admin"

    def __init__(self, sim):
        self.sim = sim
        self.url = sim.url
        self.admin_kubeconfig = self.kubeconfig = sim.kubeconfig_path
        self.ca_pem = sim.certificates.ca_pem if sim.certificates else None

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        tls = self.ca_pem and ssl.create_default_context(cadata=self.ca_pem.decode())
        with urllib.request.urlopen(request, timeout=10, context=tls or None) as response:
            return json.loads(response.read() or b"{}")

    def requests(self):
        """The Kubernetes API requests kubesim served (its own /_sim/ calls left out)."""
        items = self._call("GET", "/_sim/requests")["items"]
        return [r for r in items if not r["path"].startswith("/_sim/")]

    def clear_requests(self):
        self._call("DELETE", "/_sim/requests")

    def faults(self, **config):
        return self._call("PUT", "/_sim/faults", config)

    def clear_faults(self):
        return self._call("DELETE", "/_sim/faults")

    def pass_time(self, seconds):
        if seconds:
            self._call("POST", "/_sim/clock", {"advance": seconds})

    def service_account_token(self, namespace, name):
        return self.sim.auth.service_account_token(namespace, name)

    def user_kubeconfig(self, user, groups, path: Path) -> str:
        token = f"user-{uuid.uuid4().hex}"
        self.sim.auth.add_token(token, user, groups=list(groups))
        return self.portal_kubeconfig(token, path)

    def reclaim(self, node, *, grace_seconds=30):
        """A spot reclaim: cordon, evict every pod (DisruptionTarget), delete the node
        once the grace is over."""
        self._call(
            "POST",
            f"/_sim/nodes/{node}/reclaim",
            {"mode": "eviction", "grace_seconds": grace_seconds},
        )

    def xid(self, node, gpu, code):
        return self._call("POST", f"/_sim/nodes/{node}/gpus/{gpu}/xid", {"code": code})

    def set_node_ready(self, node, ready: bool):
        self._call(
            "POST", f"/_sim/nodes/{node}/condition", {"status": "True" if ready else "Unknown"}
        )

    def expire_watch_history(self):
        """Forget the watch history: any stored resourceVersion is now too old (410)."""
        self._call("POST", "/_sim/compact")

    def scrape_configs(self, directory) -> str:
        """Prometheus scrape jobs for the cluster's DCGM exporter pages (file_sd, without
        honor_labels, as a DaemonSet is scraped) and kube-state-metrics."""
        targets = os.path.join(directory, "dcgm-targets.json")
        self.sim.control_plane.exporters.keep_file_sd(targets, f"127.0.0.1:{self.sim.port}")
        return (
            "  - job_name: dcgm\n"
            f"    file_sd_configs: [{{files: ['{targets}'], refresh_interval: 1s}}]\n"
            "  - job_name: kube-state-metrics\n"
            "    honor_labels: true\n"
            "    metrics_path: /metrics/kube-state-metrics\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{self.sim.port}']}}]\n"
        )


class KubernetesBackend(Backend):
    """The real control plane, as the cluster's admin sees it."""

    name = "kubernetes"
    admin_user = "kubernetes-admin"

    def __init__(self, plane: ControlPlane, directory: Path):
        self.plane = plane
        self.url = plane.url
        self.admin_kubeconfig = self.kubeconfig = str(plane.kubeconfig_path)
        self.ca_pem = plane.authority.cert_pem
        self.directory = directory
        self._audit_offset = plane.audit_log.stat().st_size if plane.audit_log.exists() else 0

    # --- the request log: the API server's audit log ---

    def clear_requests(self):
        self._audit_offset = self._audit_size()

    def _audit_size(self):
        self._barrier()
        return self.plane.audit_log.stat().st_size

    def _barrier(self):
        """A request whose audit event, once written, follows every request answered
        before it (the log is written as each request completes)."""
        marker = f"audit-barrier-{uuid.uuid4().hex[:12]}"
        self.plane.get(f"/api/v1/namespaces/default/configmaps/{marker}")
        wait_for(lambda: marker in self.plane.audit_log.read_text(), timeout=10)

    def requests(self):
        self._barrier()
        with open(self.plane.audit_log) as log:
            log.seek(self._audit_offset)
            events = [json.loads(line) for line in log if line.strip()]
        return [_request_of(e) for e in events if "audit-barrier-" not in e["requestURI"]]

    def faults(self, **config):
        raise AssertionError("fault injection is kubesim's: mark the test kubesim_only")

    clear_faults = faults

    # --- identities ---

    def service_account_token(self, namespace, name):
        review = self.plane.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3 * 3600},
            },
        )
        return review["status"]["token"]

    def user_kubeconfig(self, user, groups, path: Path) -> str:
        return str(self.plane.user_kubeconfig(user, groups, path))

    # --- nodes ---

    def reclaim(self, node, *, grace_seconds=30):
        self.plane.reclaim(node, grace_seconds=grace_seconds)

    def set_node_ready(self, node, ready: bool):
        """Stop (or resume) the node's heartbeats: NotReady after the grace period."""
        self.plane.stop_heartbeats(node, stopped=not ready)

    def xid(self, node, gpu, code):
        raise AssertionError(
            "XIDs are injected into kubesim's exporter: mark the test kubesim_only"
        )

    def expire_watch_history(self):
        """Restart the API server: its watch cache starts afresh at the current
        resourceVersion, so any older one is too old (410 Expired)."""
        self.plane.restart_apiserver()

    def scrape_configs(self, directory) -> str:
        """The real kube-state-metrics, and the DCGM pages (controlplane/dcgm.py) by
        http_sd, without honor_labels, as a DaemonSet is scraped."""
        targets = f"http://127.0.0.1:{self.plane.dcgm_port}/targets"
        return (
            "  - job_name: dcgm\n"
            f"    http_sd_configs: [{{url: '{targets}', refresh_interval: 1s}}]\n"
            "  - job_name: kube-state-metrics\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{self.plane.ksm_port}']}}]\n"
        )

    # --- after each test ---

    def reset(self, keep_namespaces=()):
        """Put the cluster back as the session started it."""
        for timer in self.plane._timers:
            timer.cancel()
        keep = SYSTEM_NAMESPACES | set(keep_namespaces)
        names = [n["metadata"]["name"] for n in self.plane.get("/api/v1/namespaces")["items"]]
        doomed = [name for name in names if name not in keep]
        for name in doomed:
            with contextlib.suppress(urllib.error.HTTPError):
                self.plane.call("DELETE", f"/api/v1/namespaces/{name}")
            for pod in self.plane.get(f"/api/v1/namespaces/{name}/pods")["items"]:
                if pod["metadata"].get("finalizers"):  # a test's own hold on it
                    with contextlib.suppress(urllib.error.HTTPError):
                        self.plane.call(
                            "PATCH",
                            f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}",
                            {"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json",
                        )
        # What a DRA test published as a driver and an admin would (cluster-scoped).
        for plural in ("resourceslices", "deviceclasses"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.plane.call("DELETE", f"/apis/resource.k8s.io/v1/{plural}")
        # The portal's admission policies and bindings (cluster-scoped): the next test
        # creates them afresh, as a new cluster would.
        for plural in (
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
            "mutatingadmissionpolicies",
        ):
            with contextlib.suppress(urllib.error.HTTPError):
                self.plane.call(
                    "DELETE",
                    f"/apis/admissionregistration.k8s.io/v1/{plural}"
                    "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpu-portal",
                )
        in_default = ("batch/v1/jobs", "v1/pods", "v1/resourcequotas", "v1/limitranges")
        for kind in (*in_default, "rbac.authorization.k8s.io/v1/rolebindings"):
            prefix = "/api" if kind.startswith("v1/") else "/apis"
            group, _, plural = kind.rpartition("/")
            with contextlib.suppress(urllib.error.HTTPError):
                self.plane.call(
                    "DELETE",
                    f"{prefix}/{group}/namespaces/default/{plural}",
                    {"propagationPolicy": "Background", "gracePeriodSeconds": 0},
                )
        self._restore_nodes()

        def clean():
            left = {n["metadata"]["name"] for n in self.plane.get("/api/v1/namespaces")["items"]}
            pods = self.plane.get("/api/v1/namespaces/default/pods")["items"]
            return not (left & set(doomed)) and not pods

        wait_for(clean, timeout=90)

    def _restore_nodes(self):
        wanted = {n["metadata"]["name"]: n for n in self.plane.node_objects}
        live = {n["metadata"]["name"]: n for n in self.plane.get("/api/v1/nodes")["items"]}
        for name in set(live) - set(wanted):
            self.plane._delete_node(name)
        for name, node in wanted.items():
            current = live.get(name)
            if current is None:
                self.plane.call("POST", "/api/v1/nodes", node)
                continue
            meta, spec = current["metadata"], current.get("spec") or {}
            labels = {k: None for k in meta.get("labels") or {}} | node["metadata"]["labels"]
            annotations = {
                k: None
                for k in meta.get("annotations") or {}
                if k.startswith(("kwok.x-k8s.io/", "kubesim.io/"))
            }
            annotations |= node["metadata"]["annotations"]
            patch = {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {"unschedulable": None, "taints": node["spec"].get("taints")},
            }
            if (meta.get("labels"), spec.get("taints"), spec.get("unschedulable")) != (
                node["metadata"]["labels"],
                node["spec"].get("taints"),
                None,
            ) or any(meta.get("annotations", {}).get(k) != v for k, v in annotations.items()):
                self.plane.call(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    patch,
                    content_type="application/merge-patch+json",
                )
        wait_for(
            lambda: all(
                kwok_nodes.is_ready(n)
                and not any(
                    t["key"].startswith("node.kubernetes.io/")
                    for t in n["spec"].get("taints") or []
                )
                for n in self.plane.get("/api/v1/nodes")["items"]
            ),
            timeout=90,
        )


def _request_of(event: dict) -> dict:
    """An audit event as a kubesim request-log entry."""
    ref = event.get("objectRef") or {}
    path = event["requestURI"].split("?", 1)[0]
    entry = {
        "verb": event["verb"],
        "method": METHOD_OF_VERB.get(event["verb"], "GET"),
        "path": path,
        "resource": ref.get("resource"),
        "namespace": ref.get("namespace"),
        "name": ref.get("name"),
        "subresource": ref.get("subresource"),
        "status": (event.get("responseStatus") or {}).get("code", 0),
        "user": (event.get("user") or {}).get("username"),
    }
    status = event.get("responseStatus") or {}
    if entry["status"] == 403 and ESCALATION in (status.get("message") or ""):
        # Authorized, then refused by RBAC's escalation check in the registry: what it
        # checked was `bind` on the role a binding names, or `escalate` on a role.
        if ref.get("resource", "").endswith("rolebindings"):
            role = (event.get("requestObject") or {}).get("roleRef") or {}
            plural = "clusterroles" if role.get("kind") == "ClusterRole" else "roles"
            fields = {"verb": "bind", "resource": plural, "name": role.get("name", "")}
        else:
            fields = {
                "verb": "escalate",
                "resource": ref.get("resource", ""),
                "name": ref.get("name", ""),
            }
        entry["forbidden"] = {
            "api_group": "rbac.authorization.k8s.io",
            "subresource": "",
            "namespace": ref.get("namespace", ""),
            **fields,
        }
    elif entry["status"] == 422 and (checked := PARAM_READ.search(status.get("message") or "")):
        spec = (event.get("requestObject") or {}).get("spec") or {}
        ref = spec.get("paramRef") or {}
        kind = checked["kind"] or "ResourceQuota"  # a binding's parameter: the team's quota
        entry["forbidden"] = {
            "verb": "get",
            "api_group": "",
            "resource": kind.lower() + "s",
            "subresource": "",
            "name": ref.get("name", ""),
            "namespace": ref.get("namespace", ""),
        }
    elif entry["status"] == 403 and (checked := REFUSED.search(status.get("message") or "")):
        # Authorized as a patch, then refused a second check in the handler (a
        # server-side apply that creates needs `create`): the message says which.
        resource, _, subresource = checked["resource"].partition("/")
        entry["forbidden"] = {
            "verb": checked["verb"],
            "api_group": checked["group"],
            "resource": resource,
            "subresource": subresource,
            "name": ref.get("name", ""),
            "namespace": checked["namespace"] or "",
        }
    elif (event.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid":
        if ref:
            fields = {
                "verb": event["verb"],
                "api_group": ref.get("apiGroup", ""),
                "resource": ref.get("resource", ""),
                "subresource": ref.get("subresource", ""),
                "name": ref.get("name", ""),
                "namespace": ref.get("namespace", ""),
            }
        else:
            fields = {"verb": event["verb"], "path": path}
        entry["forbidden"] = fields
    return entry


def control_plane_or_skip() -> ControlPlane:
    """The session's control plane, in a directory of its own (pytest prunes old base
    temp directories, even those of another session still running beside this one);
    without its build, a skip saying how to get it (a failure under CI=true)."""
    absent = missing()
    if absent:
        pytest.skip(absent)
    plane = ControlPlane(tempfile.mkdtemp(prefix="gpu-portal-control-plane-"), log=lambda *_: None)
    plane.start()
    return plane


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


# --- the fixtures (registered once, by tests/conftest.py) ---


@functools.cache
def deployed():
    """(ServiceAccount, ClusterRole, ClusterRoleBinding) as `kubectl kustomize
    deploy/base` renders them: what the portal runs as on a real cluster."""
    objects = render("deploy/base")
    (account,) = by_kind(objects, "ServiceAccount").values()
    (role,) = by_kind(objects, "ClusterRole").values()
    (binding,) = by_kind(objects, "ClusterRoleBinding").values()
    return account, role, binding


@functools.cache
def admission_policy():
    """(ValidatingAdmissionPolicy, its binding) as `kubectl kustomize deploy/base`
    renders them: what keeps the portal to its own namespaces on a real cluster."""
    objects = render("deploy/base")
    (policy,) = by_kind(objects, "ValidatingAdmissionPolicy").values()
    (binding,) = by_kind(objects, "ValidatingAdmissionPolicyBinding").values()
    return policy, binding


ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture
def namespace_policy(backend):
    """deploy/'s admission policy in force on the real control plane, taken away
    after the test; on kubesim, which has no admission policies, nothing (None).

    In force once the API server refuses the portal a dry-run relabelling of
    `default` (the policy is picked up by an informer, a moment after it is made).
    """
    if backend.name != "kubernetes":
        yield None
        return
    admin = kube.Cluster(kube.load_configuration(backend.admin_kubeconfig), timeout=10)
    # The portal's credentials, without the client's own guard: the server decides.
    portal = kube.Cluster(kube.load_configuration(backend.kubeconfig), timeout=10)
    policy, binding = admission_policy()
    objects = (
        ("validatingadmissionpolicies", policy),
        ("validatingadmissionpolicybindings", binding),
    )
    try:
        for plural, obj in objects:
            admin.call(
                "PATCH",
                f"{ADMISSION}/{plural}/{obj['metadata']['name']}",
                query={"fieldManager": "tests", "force": "true"},
                body=obj,
                content_type=kube.APPLY_PATCH,
            )

        def refused():
            try:
                portal.call(
                    "PATCH",
                    portal.path("Namespace", "default"),
                    query={"dryRun": "All"},
                    body={"metadata": {"labels": {"probe": "x"}}},
                    content_type="application/merge-patch+json",
                )
            except kube.PermanentClusterError as exc:
                return exc.status == 403 and "gpu-portal-namespaces" in exc.message
            return False

        wait_for(refused, timeout=30)
        backend.clear_requests()  # the probes are not the test's
        yield policy
    finally:
        for plural, obj in reversed(objects):
            with contextlib.suppress(kube.ClusterError):
                admin.call("DELETE", f"{ADMISSION}/{plural}/{obj['metadata']['name']}")
        admin.close()
        portal.close()


@pytest.fixture
def portal_rules(request):
    """The rules of the portal's ClusterRole: deploy/'s, unless a test gives others
    (`parametrize("portal_rules", [rules], indirect=True)`)."""
    return getattr(request, "param", None) or deployed()[1]["rules"]


@pytest.fixture(scope="session")
def control_plane():
    """The real control plane (controlplane/), one per session. Its files live in a
    directory of its own: pytest prunes old base temp directories, including those
    of another session still running beside this one."""
    plane = control_plane_or_skip()
    yield plane
    plane.stop()
    shutil.rmtree(plane.directory, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def backend(request, settings, tmp_path, portal_rules):
    """The demo cluster, on kubesim or on the real control plane, with
    authentication and RBAC on and the portal (this process and the workers)
    talking to it as deploy/'s ServiceAccount holding deploy/'s ClusterRole: what
    passes here passes on a cluster that enforces it."""
    account, role, binding = deployed()
    meta = account["metadata"]
    if request.param == "kubesim":
        # kubectl sends no credentials over plain HTTP: its tests mark themselves kubesim_tls.
        tls = request.node.get_closest_marker("kubesim_tls") is not None
        context = running_kubesim(auth=True, tls=tls)
        cluster_backend = KubesimBackend(context.__enter__())
    else:
        context = None
        cluster_backend = KubernetesBackend(request.getfixturevalue("control_plane"), tmp_path)
    try:
        admin = kube.Cluster(kube.load_configuration(cluster_backend.admin_kubeconfig), timeout=10)
        if cluster_backend.name == "kubernetes":
            admin.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": meta["namespace"]}},
                field_manager="tests",
            )
            admin.call(
                "PATCH",
                f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{meta['name']}",
                query={"fieldManager": "tests"},
                body=account,
                content_type=kube.APPLY_PATCH,
            )
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        for plural, obj in (
            ("clusterroles", {**role, "rules": portal_rules}),
            ("clusterrolebindings", binding),
        ):
            admin.call(
                "PATCH",
                f"{rbac}/{plural}/{obj['metadata']['name']}",
                query={"fieldManager": "tests", "force": "true"},
                body=obj,
                content_type=kube.APPLY_PATCH,
            )
        admin.close()
        token = cluster_backend.service_account_token(meta["namespace"], meta["name"])
        path = cluster_backend.portal_kubeconfig(token, tmp_path / "portal.kubeconfig")
        cluster_backend.clear_requests()  # the tests count the portal's requests
        settings.PORTAL_KUBECONFIG = path
        settings.PORTAL_KUBE_CONTEXT = None
        kube.reset()
        cluster_backend.kubeconfig = path  # what the workers are given
        cluster_backend.portal_user = f"system:serviceaccount:{meta['namespace']}:{meta['name']}"
        yield cluster_backend
    finally:
        kube.reset()
        if context is not None:
            context.__exit__(None, None, None)
        else:
            cluster_backend.reset(keep_namespaces={meta["namespace"]})


@pytest.fixture
def cluster(backend):
    """A cluster admin's client (not the portal's), for looking at and tampering
    with the cluster."""
    admin = kube.Cluster(kube.load_configuration(backend.admin_kubeconfig), timeout=10)
    yield admin
    admin.close()
