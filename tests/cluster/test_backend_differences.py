"""The table "kubesim and the real API server" in docs/kubesim.md, kept true.

Each row names a probe below. The probe runs on both backends and reduces what
the server answered to a short line; that line must be the one the table
gives for the backend, word for word. A row whose two cells are equal is a
behaviour kubesim gets right (most were fixed after the real server showed
the difference); a row whose cells differ is a difference kept on purpose,
said once in the docs and here."""

import json
import re
import time
from pathlib import Path

import pytest

from cluster import kube
from tests.waiting import wait_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubesim.md"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
RESTRICTED = {  # what PodSecurity's `restricted` level asks of a pod
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
}
RESTRICTED_CONTAINER = {
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
}


def documented() -> dict[str, tuple[str, str]]:
    """{probe: (kubesim's line, the real server's line)} from the table in the docs."""
    text = DOC.read_text()
    section = text.split("## kubesim and the real API server", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`[a-z0-9-]+`", cells[0]):
            rows[cells[0].strip("`")] = (_unquote(cells[2]), _unquote(cells[3]))
    return rows


def _unquote(cell: str) -> str:
    return cell.strip().removeprefix("`").removesuffix("`").replace("\\|", "|")


class Api:
    """The cluster admin's HTTP calls, answering (status code, JSON body)."""

    def __init__(self, cluster: kube.Cluster):
        self.cluster = cluster

    def __call__(self, method, path, body=None, content_type="application/json"):
        client = self.cluster.api_client
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        method, url, headers, data, _ = client.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = client.call_api(
            method, url, header_params=headers, body=data, _request_timeout=30
        )
        response.read()
        text = response.data.decode() if response.data else ""
        try:
            return response.status, json.loads(text) if text else {}
        except ValueError:
            return response.status, text


def message(answer) -> str:
    code, body = answer
    if isinstance(body, dict):
        return f"{code} {body.get('message', body.get('kind', ''))}".strip()
    return f"{code} {body.strip()}"


def namespace(api, name, labels=None):
    meta = {"name": name, **({"labels": labels} if labels else {})}
    assert (
        api(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
        )[0]
        == 201
    )
    return name


def pod(name, *, annotations=None, restart="Never", **spec):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": annotations or {},
            "labels": spec.pop("labels", {}),
        },
        "spec": {
            "restartPolicy": restart,
            **RESTRICTED,
            "containers": [{"name": "main", "image": "busybox", **RESTRICTED_CONTAINER}],
            **spec,
        },
    }


def watch_states(api, path, resource_version, until, timeout):
    """The pod's distinct states ("phase", or "phase/waiting reason") as a watch sees
    them, until `until(states)` holds."""
    states = []
    deadline = time.monotonic() + timeout
    version = resource_version
    while time.monotonic() < deadline and not until(states):
        code, text = api("GET", f"{path}&watch=true&resourceVersion={version}&timeoutSeconds=2")
        lines = text.splitlines() if isinstance(text, str) else [json.dumps(text)]
        for line in lines:
            event = json.loads(line)
            obj = event["object"]
            version = obj["metadata"].get("resourceVersion", version)
            status = obj.get("status") or {}
            waiting = [
                (c.get("state") or {}).get("waiting", {}).get("reason")
                for c in status.get("containerStatuses") or []
            ]
            state = status.get("phase", "") + (f"/{waiting[0]}" if waiting and waiting[0] else "")
            if not states or states[-1] != state:
                states.append(state)
    return states


# --- the probes: each returns one line ---


def probe_strict_unknown_field(api, backend):
    body = pod("p")
    body["spec"]["bogus"] = 1
    return message(api("POST", "/api/v1/namespaces/default/pods?fieldValidation=Strict", body))


def probe_apply_unknown_field(api, backend):
    config = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "1"}, "bogus": 1},
    }
    return message(
        api(
            "PATCH",
            "/api/v1/namespaces/default/resourcequotas/q?fieldManager=probe",
            config,
            "application/apply-patch+yaml",
        )
    )


def probe_namespace_terminating(api, backend):
    namespace(api, "leaving")
    held = pod("held")
    held["metadata"]["finalizers"] = ["tests.gpu-portal.io/hold"]
    api("POST", "/api/v1/namespaces/leaving/pods", held)
    deleted = api("DELETE", "/api/v1/namespaces/leaving")
    new = api(
        "POST",
        "/api/v1/namespaces/leaving/limitranges",
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "l"},
            "spec": {"limits": []},
        },
    )
    again = api(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "leaving"}},
    )
    causes = [c["reason"] for c in (new[1].get("details") or {}).get("causes") or []]
    api(
        "PATCH",
        "/api/v1/namespaces/leaving/pods/held",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    phase = deleted[1]["status"]["phase"]
    return f"{deleted[0]} {phase}; {new[0]} {','.join(causes)}; {message(again)}"


def probe_field_selector_unknown(api, backend):
    return message(api("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx"))


def probe_set_based_label_selector(api, backend):
    ns = namespace(api, "labels")
    for name, labels in (
        ("a", {"tier": "a"}),
        ("b", {"tier": "b", "canary": "1"}),
        ("c", {"tier": "c"}),
    ):
        api("POST", f"/api/v1/namespaces/{ns}/pods", pod(name, labels=labels))
    code, listed = api(
        "GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=tier%20in%20(a,b),!canary"
    )
    return f"{code} " + ",".join(p["metadata"]["name"] for p in listed["items"])


def probe_delete_answers(api, backend):
    limit = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "l"},
        "spec": {"limits": []},
    }
    api("POST", "/api/v1/namespaces/default/limitranges", limit)
    code, body = api("DELETE", "/api/v1/namespaces/default/limitranges/l")
    missing = api("DELETE", "/api/v1/namespaces/default/limitranges/l")
    kind = body.get("kind")
    outcome = f"{kind} {body.get('status')}" if kind == "Status" else kind
    return f"{code} {outcome}; {message(missing)}"


def probe_resource_k8s_io(api, backend):
    return message(api("GET", "/apis/resource.k8s.io/v1/deviceclasses"))


def probe_admission_policies(api, backend):
    return "; ".join(
        message(api("GET", f"/apis/admissionregistration.k8s.io/v1/{plural}"))
        for plural in ("validatingadmissionpolicies", "mutatingadmissionpolicies")
    )


def probe_pod_security(api, backend):
    ns = namespace(api, "restricted", {"pod-security.kubernetes.io/enforce": "restricted"})
    privileged = pod("root")
    privileged["spec"].pop("securityContext")
    privileged["spec"]["containers"][0].pop("securityContext")
    code, body = api("POST", f"/api/v1/namespaces/{ns}/pods", privileged)
    return f"{code}" + (" violates PodSecurity" if "violates PodSecurity" in str(body) else "")


def probe_pod_lifecycle(api, backend):
    body = pod("run", annotations={"kubesim.io/duration": "2s"}, tolerations=TOLERATE_GPU)
    code, made = api("POST", "/api/v1/namespaces/default/pods", body)
    states = watch_states(
        api,
        "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Drun",
        made["metadata"]["resourceVersion"],
        lambda s: s and s[-1] == "Succeeded",
        timeout=60,
    )
    return " > ".join(states)


def probe_crash_loop(api, backend):
    body = pod(
        "crash",
        restart="Always",
        annotations={"kubesim.io/duration": "1s", "kubesim.io/exit-code": "1"},
    )
    code, made = api("POST", "/api/v1/namespaces/default/pods", body)

    def restarted():
        _, live = api("GET", "/api/v1/namespaces/default/pods/crash")
        statuses = (live.get("status") or {}).get("containerStatuses") or []
        return statuses and statuses[0].get("restartCount", 0) >= 1 and statuses[0]

    status = wait_for(restarted, timeout=60, every=lambda: backend.pass_time(1))
    state = status["state"]
    return f"restart 1: {next(iter(state))} {state.get('waiting', {}).get('reason', '')}".rstrip()


def probe_job_failure_backoff(api, backend):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "failing"},
        "spec": {
            "backoffLimit": 1,
            "template": pod(
                "x", annotations={"kubesim.io/duration": "1s", "kubesim.io/exit-code": "1"}
            ),
        },
    }
    job["spec"]["template"].pop("apiVersion")
    job["spec"]["template"].pop("kind")
    api("POST", "/apis/batch/v1/namespaces/default/jobs", job)

    def two_pods():
        _, listed = api("GET", "/api/v1/namespaces/default/pods?labelSelector=job-name%3Dfailing")
        return len(listed["items"]) >= 2 and listed["items"]

    pods = wait_for(two_pods, timeout=90, every=lambda: backend.pass_time(1))
    first, second = sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    ended = first["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    gap = _seconds(second["metadata"]["creationTimestamp"]) - _seconds(ended)
    return "replacement after the 10 s back-off" if gap >= 9 else "replacement at once"


def _seconds(stamp: str) -> float:
    from kubesim.clock import parse_time

    return parse_time(stamp).timestamp()


def probe_log_options(api, backend):
    body = pod("logs", annotations={"kubesim.io/duration": "60s"}, tolerations=TOLERATE_GPU)
    api("POST", "/api/v1/namespaces/default/pods", body)
    wait_for(
        lambda: (
            api("GET", "/api/v1/namespaces/default/pods/logs")[1]["status"].get("phase")
            == "Running"
        ),
        timeout=60,
    )
    _, limited = api("GET", "/api/v1/namespaces/default/pods/logs/log?limitBytes=7")
    previous = api("GET", "/api/v1/namespaces/default/pods/logs/log?previous=true")
    return f"limitBytes=7: {len(limited)} bytes; previous: {previous[0]}"


def workload(kind, name, replicas, **spec):
    labels = {"app": name}
    template = pod(name, restart="Always", tolerations=TOLERATE_GPU)
    template["metadata"] = {"labels": labels}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
            **spec,
        },
    }


APPS = "/apis/apps/v1/namespaces/apps"  # its own namespace: the real backend's reset
PODS = "/api/v1/namespaces/apps/pods"  # deletes it, Deployments and all
# The real server copies the node's zone onto a bound pod (PodTopologyLabels); kubesim
# does not, for any pod: left out of what the apps/v1 probes compare.
ZONE = "topology.kubernetes.io/zone"
HASH = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}")


def owned(api, path, owner):
    items = api("GET", path)[1]["items"]
    return [
        o
        for o in items
        if any(r["uid"] == owner["metadata"]["uid"] for r in o["metadata"]["ownerReferences"])
        and not o["metadata"].get("deletionTimestamp")
    ]


def deployment_with_pods(api, name, replicas):
    """(Deployment, its ReplicaSet, its live pods) once there are `replicas` pods."""
    namespace(api, "apps")
    code, made = api("POST", f"{APPS}/deployments", workload("Deployment", name, replicas))
    assert code == 201, made
    (rs,) = wait_for(lambda: owned(api, f"{APPS}/replicasets", made), timeout=60)
    pods = wait_for(
        lambda: len(found := owned(api, PODS, rs)) == replicas and found,
        timeout=60,
    )
    return made, rs, pods


def probe_deployment_chain(api, backend):
    deployment, rs, pods = deployment_with_pods(api, "web", 2)
    hash_ = rs["metadata"]["name"].removeprefix("web-")
    assert HASH.fullmatch(hash_) and rs["metadata"]["labels"]["pod-template-hash"] == hash_
    names = {p["metadata"]["name"].rsplit("-", 1)[0] for p in pods}
    refs = {(r["kind"], r["controller"], r["blockOwnerDeletion"]) for p in pods + [rs]
            for r in p["metadata"]["ownerReferences"]}  # fmt: skip
    labels = ",".join(sorted(set(pods[0]["metadata"]["labels"]) - {ZONE}))
    annotations = api("GET", f"{APPS}/deployments/web")[1]["metadata"]["annotations"]
    shown = "web-<hash>-xxxxx" if names == {rs["metadata"]["name"]} else names
    revision = annotations["deployment.kubernetes.io/revision"]
    owners = sorted(refs)
    return f"owns {len(pods)} pods {shown} labelled {labels}; owners {owners}; revision {revision}"


COUNTS = ("replicas", "terminatingReplicas")


def probe_deployment_scaled_to_zero(api, backend):
    deployment, rs, _ = deployment_with_pods(api, "idle", 1)
    code, _ = api("PATCH", f"{APPS}/deployments/idle", {"spec": {"replicas": 0}},
                  content_type="application/merge-patch+json")  # fmt: skip
    backend.pass_time(31)  # the pod's grace period, on kubesim's clock
    wait_for(lambda: not api("GET", PODS)[1]["items"], timeout=60)

    def settled():
        found = api("GET", f"{APPS}/deployments/idle")[1]
        replica_set = api("GET", f"{APPS}/replicasets/{rs['metadata']['name']}")[1]
        generations = (found, replica_set)
        done = all(o["status"].get("observedGeneration") == 2 for o in generations)
        # Both controllers have seen the pod go (the ReplicaSet's status counts it as
        # terminating until its next sync: a loaded run read it in between).
        gone = not any(o["status"].get(f) for o in generations for f in COUNTS)
        return done and gone and generations

    found, replica_set = wait_for(settled, timeout=60)
    return (
        f"{code}; Deployment status {','.join(sorted(found['status']))}; "
        f"ReplicaSet spec.replicas {replica_set['spec']['replicas']}, "
        f"status {json.dumps(replica_set['status'], sort_keys=True)}"
    )


def probe_statefulset_pods(api, backend):
    body = workload("StatefulSet", "db", 2, serviceName="db")
    namespace(api, "apps")
    code, made = api("POST", f"{APPS}/statefulsets", body)
    pods = wait_for(
        lambda: len(found := owned(api, PODS, made)) == 2 and found,
        timeout=60,
    )
    labels = ",".join(sorted(set(pods[0]["metadata"]["labels"]) - {ZONE}))
    names = ",".join(sorted(p["metadata"]["name"] for p in pods))
    return f"{code} {names} labelled {labels}, hostname {pods[0]['spec'].get('hostname')}"


PROBES = {
    name.removeprefix("probe_").replace("_", "-"): probe
    for name, probe in list(globals().items())
    if name.startswith("probe_")
}


def test_every_probe_has_a_row_and_every_row_a_probe():
    assert set(documented()) == set(PROBES)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_the_backend_answers_as_the_table_says(probe, backend, cluster):
    answer = PROBES[probe](Api(cluster), backend)
    kubesim_line, real_line = documented()[probe]
    assert answer == (kubesim_line if backend.name == "kubesim" else real_line)
