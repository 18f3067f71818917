"""What the apiserver fills in that a client left out: pkg/apis/*/v1/defaults.go and the
defaulting admission plugins, and the quantities Go's encoder writes as strings."""

NOT_READY_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(container: dict) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if isinstance(container.get("image"), str):
        container.setdefault("imagePullPolicy", _image_pull_policy(container["image"]))
    resources = container.setdefault("resources", {})
    if isinstance(resources, dict) and resources.get("limits"):
        # Requests default to limits for every resource that only has a limit.
        requests = resources.setdefault("requests", {})
        for name, quantity in resources["limits"].items():
            requests.setdefault(name, quantity)
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict, *, template: bool = False) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                _default_container(container)
    if not template:
        # Admission plugins (ServiceAccount, DefaultTolerationSeconds, Priority) run on
        # pods only, not on the templates inside Jobs.
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        tolerations = spec.setdefault("tolerations", [])
        present = {t.get("key") for t in tolerations if isinstance(t, dict)}
        for toleration in NOT_READY_TOLERATIONS:
            if toleration["key"] not in present:
                tolerations.append(dict(toleration))


def qos_class(spec: dict) -> str:
    """The pod's QoS class, from its containers' cpu and memory requests and limits."""
    requests_seen = limits_seen = False
    guaranteed = True
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_seen |= bool(requests)
        limits_seen |= bool(limits)
        for name in ("cpu", "memory"):
            if name not in limits or str(requests.get(name)) != str(limits[name]):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    default_pod_spec(spec)
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))
    conditions = status.get("conditions") or []
    if spec.get("schedulingGates") and not any(
        isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions
    ):
        # The apiserver marks a gated pod at creation (applySchedulingGatedCondition).
        status["conditions"] = conditions + [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": None,
                "lastTransitionTime": None,
            }
        ]
    _container_quantities_as_strings(spec)


def default_job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    uid = obj["metadata"]["uid"]
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": obj["metadata"]["name"],
        "controller-uid": uid,
        "job-name": obj["metadata"]["name"],
    }
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **generated}
    default_pod_spec(template.setdefault("spec", {}), template=True)
    obj.setdefault("status", {})
    _template_quantities_as_strings(obj)
    if isinstance(obj.get("status"), dict):
        omit_zero_job_counts(obj["status"])


# batch/v1 JobStatus counters tagged `omitempty` (ready and terminating are pointers:
# a 0 stays); Go's encoder drops them at 0, so a real server never shows `active: 0`.
JOB_OMITEMPTY_COUNTS = ("active", "succeeded", "failed")


def omit_zero_job_counts(status: dict) -> dict:
    for key in JOB_OMITEMPTY_COUNTS:
        if status.get(key) == 0:
            del status[key]
    return status


def default_namespace(obj: dict) -> None:
    name = obj["metadata"]["name"]
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def default_quota(obj: dict) -> None:
    obj.setdefault("spec", {})
    obj.setdefault("status", {})
    _as_strings((obj.get("spec") or {}).get("hard"))
    for key in ("hard", "used"):
        _as_strings((obj.get("status") or {}).get(key))


def default_limit_range(obj: dict) -> None:
    for item in (obj.get("spec") or {}).get("limits") or []:
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            _as_strings(item.get(key) if isinstance(item, dict) else None)


def default_node(obj: dict) -> None:
    obj.setdefault("spec", {})
    obj.setdefault("status", {})
    for key in ("capacity", "allocatable"):
        _as_strings((obj.get("status") or {}).get(key))


def default_event(obj: dict) -> None:
    obj.setdefault("type", "Normal")
    obj.setdefault("count", 1)
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")
    obj.setdefault("source", {})


def default_network_policy(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("podSelector", {})
    if "policyTypes" not in spec:
        types = ["Ingress"]
        if "egress" in spec:
            types.append("Egress")
        spec["policyTypes"] = types


def _default_template(spec: dict) -> None:
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        default_pod_spec(template.setdefault("spec", {}), template=True)


def default_deployment(obj: dict) -> None:
    """pkg/apis/apps/v1/defaults.go SetDefaults_Deployment."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(spec)
    obj.setdefault("status", {})
    _template_quantities_as_strings(obj)


def default_replica_set(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _default_template(spec)
    obj.setdefault("status", {"replicas": 0})
    _template_quantities_as_strings(obj)


def default_stateful_set(obj: dict) -> None:
    """SetDefaults_StatefulSet."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )
    _default_template(spec)
    obj.setdefault("status", {"replicas": 0, "availableReplicas": 0})
    _template_quantities_as_strings(obj)


def _as_strings(mapping) -> None:
    """Quantities go out as strings, as Go's resource.Quantity marshals them (a client
    may send `nvidia.com/gpu: 1`; the typed Python models only accept strings)."""
    if isinstance(mapping, dict):
        for key, value in mapping.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                mapping[key] = str(value)


def _container_quantities_as_strings(spec) -> None:
    if not isinstance(spec, dict):
        return
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                _as_strings(resources.get("limits"))
                _as_strings(resources.get("requests"))


def _template_quantities_as_strings(obj: dict) -> None:
    _container_quantities_as_strings(((obj.get("spec") or {}).get("template") or {}).get("spec"))
