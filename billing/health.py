"""GPU health: XID errors of the last day, week or month, from dcgm-exporter via Prometheus."""

from datetime import UTC, datetime

from django.conf import settings

from billing import prometheus

# What an XID means, and whether the GPU needs the node drained (the codes
# NVIDIA's XID catalogue and operators treat as "the GPU is gone or unsafe").
XID_MEANINGS = {
    13: ("Graphics engine exception (usually the application)", False),
    31: ("GPU memory page fault (usually the application)", False),
    32: ("Invalid or corrupted push buffer stream", False),
    43: ("GPU stopped processing (the application was stopped)", False),
    45: ("Preemptive cleanup after an earlier error", False),
    48: ("Double-bit ECC error", True),
    61: ("Internal micro-controller breakpoint", False),
    62: ("Internal micro-controller halt", False),
    63: ("ECC page retirement or row remapping recorded", True),
    64: ("ECC page retirement or row remapping failed", True),
    68: ("Video processor exception", False),
    74: ("NVLink error", True),
    79: ("GPU has fallen off the bus", True),
    92: ("High single-bit ECC error rate", False),
    94: ("Contained ECC error", True),
    95: ("Uncontained ECC error", True),
    119: ("GSP RPC timeout", True),
    120: ("GSP error", True),
}


def meaning(code):
    text, drain = XID_MEANINGS.get(code, ("Unlisted XID: see NVIDIA's XID catalogue", False))
    return text, drain


# The spans the page offers, in days; the default keeps an incident in view for a
# week (a day's span lost the demo's XIDs a day after `make demo`).
SPANS = (1, 7, 30)
DEFAULT_SPAN = 7


def xid_events(hours=24, at=None):
    """[{node, gpu, instance, code, meaning, drain, namespace, pod, last_seen}] seen
    in the last `hours`, one per device, XID and pod hit. Two instant queries."""
    pod = settings.PORTAL_BILLING_LABEL_POD
    namespace = settings.PORTAL_BILLING_LABEL_NAMESPACE
    hostname = settings.PORTAL_BILLING_LABEL_HOSTNAME
    series = prometheus.query(f"max_over_time(DCGM_FI_DEV_XID_ERRORS[{hours}h]) > 0", at=at)
    # The exporter's err_code label makes each code its own series: when it was last
    # seen is its last sample in the span, found minute by minute (a coarser subquery
    # can step over a short series altogether).
    seen = {
        _key(item.labels): item.points[0][1]
        for item in prometheus.query(
            # timestamp() of the bare selector: the sample's time, not the step's.
            "max_over_time((timestamp(DCGM_FI_DEV_XID_ERRORS) and DCGM_FI_DEV_XID_ERRORS > 0)"
            f"[{hours}h:1m])",
            at=at,
        )
        if item.points
    }
    events = []
    for item in series:
        labels = item.labels
        code = int(item.points[0][1]) if item.points else 0
        last_seen = seen.get(_key(labels))
        text, drain = meaning(code)
        events.append(
            {
                "node": labels.get(hostname, ""),
                "gpu": labels.get("gpu", ""),
                "instance": labels.get("GPU_I_PROFILE", ""),
                "uuid": labels.get("UUID", ""),
                "code": code,
                "meaning": text,
                "drain": drain,
                "namespace": labels.get(namespace, ""),
                "pod": labels.get(pod, ""),
                "last_seen": (
                    datetime.fromtimestamp(last_seen, UTC) if last_seen is not None else None
                ),
            }
        )
    # After the pod it hit has gone, the exporter goes on with the device's series
    # without pod labels: the same XID once more, unnamed. Name it once.
    named = {_device_code(e) for e in events if e["pod"]}
    events = [e for e in events if e["pod"] or _device_code(e) not in named]
    return sorted(events, key=lambda e: (not e["drain"], e["node"], e["gpu"], e["pod"]))


def _key(labels):
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def span_days(value):
    """The span asked for (`?days=`), or the default for anything else."""
    try:
        days = int(value)
    except (TypeError, ValueError):
        return DEFAULT_SPAN
    return days if days in SPANS else DEFAULT_SPAN


def _device_code(event):
    return event["node"], event["gpu"], event["instance"], event["code"]
