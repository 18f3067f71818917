"""GPU XID errors: what the NVIDIA device plugin and dcgm-exporter make of them (pure).

Injected XIDs are kept on the Node as the annotation `kubesim.io/xid-events` (a JSON
list of {"gpu", "code", "time"}, newest last), so the exporter pages and the scheduler
read them from the node like everything else.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

from kubesim.clock import parse_time

EVENTS_ANNOTATION = "kubesim.io/xid-events"
MAX_EVENTS = 200
COUNT_WINDOW_MS = 300_000  # dcgm-exporter's default --xid-count-window-size (5 minutes)
# Seconds from an XID to the crash of the pod on that GPU: the application's next CUDA
# call fails and its container exits. A scrape in between sees the XID on the pod's GPU
# with the pod still holding it, which is what names the job hit (GPU health). The live
# simulator and the generated history both wait this long.
CRASH_AFTER = 30.0

# The device plugin's health check skips these: the application caused them, the GPU is
# still healthy (k8s-device-plugin health.go). Every other XID marks the device unhealthy.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})

# err_msg texts as dcgm-exporter prints them (its xidErrCodeToText, from NVIDIA's XID
# catalogue), for the codes people meet on data-centre GPUs.
MESSAGES = {
    0: "No Error",
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    38: "Driver firmware error",
    43: "GPU stopped processing",
    45: (
        "Preemptive cleanup, due to previous errors -- "
        "Most likely to see when running multiple cuda"
    ),
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context Switch Timeout Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    140: "Unrecovered ECC Error",
}


def message(code: int) -> str:
    return MESSAGES.get(code, "Unknown Error")


def events(node: dict) -> list[dict]:
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(EVENTS_ANNOTATION)
    if not raw:
        return []
    try:
        parsed = json.loads(raw)
    except ValueError:
        return []
    return [e for e in parsed if isinstance(e, dict)] if isinstance(parsed, list) else []


def with_event(node: dict, gpu: int, code: int, stamp: str) -> dict:
    """The node's annotations with one more XID event."""
    annotations = dict((node.get("metadata") or {}).get("annotations") or {})
    recorded = events(node) + [{"gpu": gpu, "code": code, "time": stamp}]
    annotations[EVENTS_ANNOTATION] = json.dumps(recorded[-MAX_EVENTS:], separators=(",", ":"))
    return annotations


def unhealthy_gpus(node: dict) -> set[int]:
    """Physical GPUs the device plugin has reported unhealthy."""
    return {e["gpu"] for e in events(node) if e.get("code") not in APPLICATION_XIDS}


def last_code(node: dict, gpu: int) -> int:
    """DCGM_FI_DEV_XID_ERRORS: the last XID of a GPU (0: none)."""
    codes = [e["code"] for e in events(node) if e.get("gpu") == gpu]
    return codes[-1] if codes else 0


def recent_counts(node: dict, gpu: int, now: datetime) -> Counter:
    """DCGM_EXP_XID_ERRORS_COUNT: XIDs of a GPU within the exporter's window."""
    since = now - timedelta(milliseconds=COUNT_WINDOW_MS)
    return Counter(
        e["code"]
        for e in events(node)
        if e.get("gpu") == gpu and since <= parse_time(e["time"]) <= now
    )


def allocatable_after(node: dict, devices: list, code: int) -> dict | None:
    """The node's allocatable once the device plugin has seen XID `code` on the GPU
    these `devices` are on (the GPU or its MIG instances): one fewer of each, unless the
    XID is the application's or the GPU was unhealthy already (None: unchanged). Read
    before the event is recorded on the node."""
    if code in APPLICATION_XIDS or not devices or devices[0].gpu in unhealthy_gpus(node):
        return None
    allocatable = dict((node.get("status") or {}).get("allocatable") or {})
    for device in devices:
        left = int(allocatable.get(device.resource, "0")) - 1
        allocatable[device.resource] = str(max(left, 0))
    return allocatable
