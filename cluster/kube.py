"""The portal's only door to the Kubernetes API: the one module that imports `kubernetes`.

Objects go in and come out as plain dicts. The official client's typed models
parse responses strictly, so we use only its configuration loading, auth and
connection pool, and read JSON ourselves. Every call has a timeout, and every
failure becomes one of the errors below:

- `TransientClusterError`: 5xx, 429 (with the server's Retry-After), timeouts and
  connection errors; worth trying again.
- `PermanentClusterError`: any other 4xx, with the server's message; trying again
  changes nothing.

Transient errors are retried here a few times with a short backoff before they
are raised, so one dropped request does not cost a whole task retry.

The portal's client (`cluster()`) never writes into or deletes a namespace that
is never a team's (`teams.namespaces.reserved`: `kube-*`, `default`, the portal's
own), whatever a caller asks: `ReservedNamespace`, before any request.
"""

import json
import logging
import os
import random
import re
import threading
import time
from urllib.parse import quote, unquote, urlencode

import urllib3
from django.conf import settings
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from teams import namespaces

log = logging.getLogger(__name__)

APPLY_PATCH = "application/apply-patch+yaml"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"

# kind -> (URL prefix of its API group, plural, namespaced)
KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
    "LimitRange": ("/api/v1", "limitranges", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    # Scaled to zero by idle policies.
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "Event": ("/api/v1", "events", True),
    # Dynamic Resource Allocation: 404 on a server without it (before Kubernetes 1.34
    # unless enabled as beta, and kubesim).
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    # Admission policies (provisioning.policies): GA since 1.30 (validating) and 1.36
    # (mutating); kubesim serves neither.
    "ValidatingAdmissionPolicy": (ADMISSION, "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": (ADMISSION, "validatingadmissionpolicybindings", False),
    "MutatingAdmissionPolicy": (ADMISSION, "mutatingadmissionpolicies", False),
    "MutatingAdmissionPolicyBinding": (ADMISSION, "mutatingadmissionpolicybindings", False),
}
OPTIONAL_GROUPS = {ADMISSION, "/apis/resource.k8s.io/v1"}
# How long what the server serves (`Cluster.serves`) is trusted: an upgrade that
# starts serving a kind is seen within this.
DISCOVERY_TTL = 300


class ClusterError(Exception):
    """Anything that went wrong talking to the cluster."""

    status = None


class TransientClusterError(ClusterError):
    def __init__(self, message, *, status=None, retry_after=None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class PermanentClusterError(ClusterError):
    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class NotConfigured(PermanentClusterError):
    def __init__(self, message):
        super().__init__(0, message)


class ReservedNamespace(PermanentClusterError):
    """A write the portal refuses to make: into, or of, a namespace that is never a
    team's. Nothing was sent."""

    def __init__(self, message):
        super().__init__(0, message)


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The namespace a request's path is in, or is: /api/v1/namespaces/NAME[/...] and
# /apis/GROUP/VERSION/namespaces/NAME/...
NAMESPACE_OF_PATH = re.compile(r"^/apis?/(?:[^/]+/)*?namespaces/([^/]+)")


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def load_configuration(kubeconfig=None, context=None):
    """A client Configuration from, in order: an explicit kubeconfig or context,
    $KUBECONFIG, the pod's service account, ~/.kube/config."""
    configuration = k8s_client.Configuration()
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        if kubeconfig or context or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        else:
            # In a pod: the ServiceAccount's token and CA where the kubelet mounts
            # them (re-read as the token rotates), or where PORTAL_SERVICE_ACCOUNT_DIR says.
            directory = os.environ.get("PORTAL_SERVICE_ACCOUNT_DIR") or SERVICE_ACCOUNT_DIR
            k8s_config.incluster_config.InClusterConfigLoader(
                token_filename=os.path.join(directory, "token"),
                cert_filename=os.path.join(directory, "ca.crt"),
            ).load_and_set(configuration)
    except (k8s_config.ConfigException, OSError) as exc:
        raise NotConfigured(f"No usable Kubernetes configuration: {exc}") from None
    # One attempt per call at the HTTP level; retries are ours (below) and Celery's.
    configuration.retries = False
    return configuration


def _retry_after(headers):
    try:
        return max(0.0, float((headers or {}).get("Retry-After")))
    except (TypeError, ValueError):
        return None


def _server_message(body, fallback):
    try:
        status = json.loads(body)
    except (TypeError, ValueError):
        return (body or fallback).strip()[:2000] or fallback
    if isinstance(status, dict) and status.get("message"):
        return status["message"]
    return fallback


def _malformed_apply(status, body):
    """A server-side apply the API server cannot type (a field its schema lacks, a value
    of the wrong type) is answered 500, but is the request's fault: never worth a retry."""
    return status == 500 and "failed to create typed patch object" in (body or "")


def _namespace_terminating(body):
    """True for the NamespaceLifecycle refusal of new content in a namespace that is
    being deleted: a 403 that the namespace controller ends, so worth trying again."""
    try:
        causes = ((json.loads(body) or {}).get("details") or {}).get("causes") or []
    except (TypeError, ValueError, AttributeError):
        return False
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


class Cluster:
    """One API server: a connection pool, a timeout and a retry budget."""

    def __init__(
        self,
        configuration,
        *,
        timeout,
        retries=2,
        backoff=0.2,
        max_retry_wait=5.0,
        reserved=None,
    ):
        self.api_client = k8s_client.ApiClient(configuration)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self._served = {}  # API group-version path -> (resource plurals, when read)
        # namespace name -> why no write may touch it ("" if one may), or None
        # for a client that may write anywhere its credentials let it (the tests').
        self.reserved = reserved

    def close(self):
        self.api_client.close()

    # --- one HTTP call ---

    def _call_once(
        self, method, path, *, query=None, body=None, content_type=None, raw=False, timeout=None
    ):
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        method, url, headers, body, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path + (f"?{urlencode(query)}" if query else ""),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=timeout or self.timeout,
            )
            response.read()
        except urllib3.exceptions.HTTPError as exc:
            # Timeouts, refused and reset connections, protocol errors.
            raise TransientClusterError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        except k8s_client.ApiException as exc:
            raise TransientClusterError(f"{method} {path}: {exc.reason}") from None
        text = response.data.decode("utf-8", "replace") if response.data else ""
        if 200 <= response.status < 300:
            if raw:
                return text
            return json.loads(text) if text else {}
        message = _server_message(text, response.reason or f"HTTP {response.status}")
        transient = response.status >= 500 or response.status == 429 or _namespace_terminating(text)
        if transient and not _malformed_apply(response.status, text):
            raise TransientClusterError(
                f"{method} {path}: {response.status} {message}",
                status=response.status,
                retry_after=_retry_after(response.headers),
            )
        raise PermanentClusterError(response.status, message)

    def call(self, method, path, **kwargs):
        """One API call, retried in place on transient errors.

        Every call we make is idempotent (GET, server-side apply, DELETE of a fixed
        name), so repeating one after a lost response is safe. A write into a
        reserved namespace is refused before it is sent (`ReservedNamespace`).
        """
        self._refuse_reserved(method, path)
        for attempt in range(self.retries + 1):
            try:
                return self._call_once(method, path, **kwargs)
            except TransientClusterError as exc:
                wait = max(exc.retry_after or 0, self.backoff * 2**attempt * random.uniform(1, 1.5))
                if attempt == self.retries or wait > self.max_retry_wait:
                    raise
                log.info("retrying in %.1fs: %s", wait, exc)
                time.sleep(wait)
        raise AssertionError("unreachable")

    def _refuse_reserved(self, method, path):
        if self.reserved is None or method not in WRITES:
            return
        match = NAMESPACE_OF_PATH.match(path)
        why = match and self.reserved(unquote(match.group(1)))
        if why:
            raise ReservedNamespace(f"{method} {path} not sent: {why}")

    # --- objects ---

    @staticmethod
    def path(kind, name=None, namespace=None):
        prefix, plural, namespaced = KINDS[kind]
        path = prefix
        if namespaced and namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{plural}"
        return path + (f"/{quote(name, safe='')}" if name else "")

    @classmethod
    def path_of(cls, obj):
        meta = obj["metadata"]
        return cls.path(obj["kind"], meta["name"], meta.get("namespace"))

    def serves(self, kind):
        """Whether the server serves `kind`. The core, apps, batch, RBAC and networking
        kinds every server has; for the others, its group-version's discovery
        document, one GET per group-version and DISCOVERY_TTL (a 404: not served)."""
        prefix, plural, _ = KINDS[kind]
        if prefix not in OPTIONAL_GROUPS:
            return True
        plurals, read_at = self._served.get(prefix, (None, 0.0))
        if plurals is None or time.monotonic() - read_at > DISCOVERY_TTL:
            try:
                document = self.call("GET", prefix)
            except PermanentClusterError as exc:
                if exc.status != 404:
                    raise
                document = {}
            plurals = {r.get("name") for r in document.get("resources") or []}
            self._served[prefix] = (plurals, time.monotonic())
        return plural in plurals

    def get(self, kind, name, namespace=None):
        """The live object, or None if there is none. One API call."""
        try:
            return self.call("GET", self.path(kind, name, namespace))
        except PermanentClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, obj, *, field_manager, force=True):
        """Server-side apply: create or update the fields we own. One API call."""
        query = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return self.call(
            "PATCH", self.path_of(obj), query=query, body=obj, content_type=APPLY_PATCH
        )

    def delete(self, kind, name, namespace=None, *, preconditions=None):
        """Delete an object; True if it was there. One API call.

        `preconditions` ({"uid": ..., "resourceVersion": ...}, from a GET): the API
        server deletes it only if it is still that object unchanged, else answers
        409 Conflict (PermanentClusterError): a check made on what was read holds."""
        body = {"propagationPolicy": "Background"}
        if preconditions:
            body["preconditions"] = dict(preconditions)
        try:
            self.call(
                "DELETE",
                self.path(kind, name, namespace),
                body=body,
                content_type="application/json",
            )
        except PermanentClusterError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list(self, kind, *, namespace=None, label_selector=None, field_selector=None):
        """All items of a kind, following `continue` tokens. One call per page of 500."""
        return self.list_versioned(
            kind, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )[0]

    def list_versioned(self, kind, *, namespace=None, label_selector=None, field_selector=None):
        """(items, the list's resourceVersion): a watch resumes from that version."""
        query = {"limit": 500}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        items = []
        while True:
            page = self.call("GET", self.path(kind, namespace=namespace), query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, meta.get("resourceVersion") or ""
            query["continue"] = meta["continue"]

    def watch(self, kind, *, resource_version, label_selector=None, timeout_seconds=5):
        """The events since `resource_version`, for up to `timeout_seconds`: one call.

        [{"type": ADDED | MODIFIED | DELETED | BOOKMARK | ERROR, "object": {...}}], in
        order. An ERROR event with code 410 means the version is too old: list again.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": int(timeout_seconds),
            "allowWatchBookmarks": "true",
        }
        if label_selector:
            query["labelSelector"] = label_selector
        text = self.call(
            "GET",
            self.path(kind),
            query=query,
            raw=True,
            timeout=timeout_seconds + self.timeout,
        )
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def pod_log(self, namespace, name, *, tail_lines=20, limit_bytes=16384):
        """The last lines of a pod's log (its first container), as text. One call."""
        query = {"tailLines": tail_lines, "limitBytes": limit_bytes}
        return self.call("GET", self.path("Pod", name, namespace) + "/log", query=query, raw=True)


_local = threading.local()


def connection_of(entry=None):
    """(kubeconfig, context) of `entry`, a `cluster.models.Cluster` (None: the
    portal's own cluster): its own where it names them, else the settings'."""
    kubeconfig, context = settings.PORTAL_KUBECONFIG, settings.PORTAL_KUBE_CONTEXT
    if entry is not None and entry.kubeconfig:
        kubeconfig, context = entry.kubeconfig, None
    if entry is not None and entry.context:
        context = entry.context
    return kubeconfig, context


def cluster(entry=None):
    """This thread's client of `entry` (a `cluster.models.Cluster`; None: the one
    the settings name), built on first use (not at import), one per connection."""
    clients = _local.__dict__.setdefault("clients", {})
    key = connection_of(entry)
    current = clients.get(key)
    if current is None:
        current = Cluster(
            load_configuration(*key),
            timeout=settings.PORTAL_KUBE_TIMEOUT,
            retries=settings.PORTAL_KUBE_RETRIES,
            reserved=namespaces.reserved,
        )
        clients[key] = current
    return current


def reset():
    """Forget this thread's clients (tests that switch API servers)."""
    for current in _local.__dict__.pop("clients", {}).values():
        current.close()
