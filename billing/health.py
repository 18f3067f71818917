"""GPU health: XID errors of the last day, week or month, from dcgm-exporter via Prometheus."""

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings

from billing import prometheus

logger = logging.getLogger(__name__)

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


XID_SERIES = 'DCGM_FI_DEV_XID_ERRORS{err_code!="0"}'


def first_seen_within(hours):
    """Seconds to within which `xid_events(hours)` knows when an XID happened: a
    minute over a day, four over longer spans (a month at 1 m took 5 s to ask)."""
    return 60 if hours <= 24 else 240


def xid_events(hours=24, at=None):
    """[{node, gpu, instance, code, meaning, drain, namespace, pod, first_seen,
    earlier}] seen in the last `hours`, one per device, XID and pod hit; `earlier`:
    the GPU already reported it when the span began. Two instant queries."""
    pod = settings.PORTAL_BILLING_LABEL_POD
    namespace = settings.PORTAL_BILLING_LABEL_NAMESPACE
    hostname = settings.PORTAL_BILLING_LABEL_HOSTNAME
    series = prometheus.query(f"max_over_time(DCGM_FI_DEV_XID_ERRORS[{hours}h]) > 0", at=at)
    # The exporter repeats a GPU's last XID until the next one, and its err_code label
    # makes each code its own series: when the XID happened is the series' first
    # sample, found to within the subquery's step (a step over Prometheus' 5-minute
    # lookback could miss the pod's series, which lasts until the pod crashes).
    seen = {
        _key(item.labels): item.points[0][1]
        for item in prometheus.query(
            # timestamp() of the bare selector: the sample's time, not the step's. The
            # err_code matcher keeps the subquery to the few series with an XID (every
            # GPU has one at 0); an exporter without the label is read whole.
            f"min_over_time((timestamp({XID_SERIES}) and {XID_SERIES} > 0)"
            f"[{hours}h:{first_seen_within(hours) // 60}m])",
            at=at,
        )
        if item.points
    }
    span_start = (at or datetime.now(UTC)) - timedelta(hours=hours)
    events = []
    for item in series:
        labels = item.labels
        code = int(item.points[0][1]) if item.points else 0
        first = seen.get(_key(labels))
        first_seen = datetime.fromtimestamp(first, UTC) if first is not None else None
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
                "first_seen": first_seen,
                # Reported from the span's first minutes: it happened before them.
                "earlier": first_seen is not None
                and first_seen - span_start < timedelta(minutes=2),
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


def unusable_gpus():
    """{node: [{gpu, code, meaning}]} of the GPUs whose last XID (the exporter's
    `DCGM_FI_DEV_XID_ERRORS` now) is one that takes the GPU out of service (`drain`
    above): the inventory counts them out of what can run. None when Prometheus
    cannot tell (not configured, unreachable). One instant query."""
    hostname = settings.PORTAL_BILLING_LABEL_HOSTNAME
    try:
        series = prometheus.query(f"{XID_SERIES} > 0")
    except prometheus.PrometheusError as exc:
        logger.warning("GPU health unknown, XIDs not counted out of capacity: %s", exc)
        return None
    unusable = {}
    for item in series:
        code = int(item.points[0][1]) if item.points else 0
        text, drain = meaning(code)
        node, gpu = item.labels.get(hostname, ""), item.labels.get("gpu", "")
        if not (drain and node):
            continue
        xid = {"gpu": gpu, "code": code, "meaning": text}
        if xid not in unusable.setdefault(node, []):  # one per GPU, not per MIG instance
            unusable[node].append(xid)
    return unusable
