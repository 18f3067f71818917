"""A Grafana dashboard with the idle dashboard's panels, from the portal's own
PromQL (`metering.recent_queries`): per-workload engine activity, the GPUs
held idle, and what that idle time costs, for teams that live in Grafana.

The exporter's label names are dashboard variables (`namespace_label`,
`pod_label`), as they are settings here; the price per GPU-hour is a
variable too, since the rate card lives in the portal's database.
deploy/grafana/gpu-idle.json is this function's output
(`python manage.py grafana_dashboard`); a test keeps the two the same.
"""

from django.test.utils import override_settings

from billing import metering

THRESHOLD = "$idle_threshold"


def _queries():
    """The 24-hour strips' PromQL with Grafana's variables for the labels."""
    with override_settings(
        PORTAL_BILLING_LABEL_NAMESPACE="${namespace_label}",
        PORTAL_BILLING_LABEL_POD="${pod_label}",
    ):
        texts = metering.recent_queries(["NAMESPACES"])
    # The portal names the team namespaces; Grafana's variable picks among them.
    return texts["activity"].replace('=~"NAMESPACES"', '=~"${namespace:regex}"')


def _panel(ident, title, kind, expr, legend, y, unit="", description="", width=24):
    return {
        "id": ident,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": 0, "y": y, "w": width, "h": 9},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend, "interval": "1m"}],
    }


def dashboard():
    activity = _queries()
    by_pod = "${namespace_label}, ${pod_label}"
    idle = f"({activity}) < bool {THRESHOLD}"
    panels = [
        _panel(
            1,
            "Engine activity per workload's GPU",
            "state-timeline",
            activity,
            "{{${namespace_label}}}/{{${pod_label}}} GPU {{gpu}}",
            0,
            "percentunit",
            "Each device a pod holds, per minute (nothing where nothing ran). "
            "Below the idle threshold it is idle.",
        ),
        _panel(
            2,
            "GPUs held idle now",
            "timeseries",
            f"count by ({by_pod}) (({activity}) < {THRESHOLD})",
            "{{${namespace_label}}}/{{${pod_label}}}",
            9,
            "short",
        ),
        _panel(
            3,
            "Idle GPU-hours over the range, by pod",
            "bargauge",
            f"sort_desc(sum by ({by_pod}) (sum_over_time(({idle})[$__range:1m])) / 60)",
            "{{${namespace_label}}}/{{${pod_label}}}",
            18,
            "h",
        ),
        _panel(
            4,
            "Idle cost over the range, by pod",
            "bargauge",
            f"sort_desc(sum by ({by_pod}) (sum_over_time(({idle})[$__range:1m])) / 60"
            " * $price_per_gpu_hour)",
            "{{${namespace_label}}}/{{${pod_label}}}",
            27,
            "currencyUSD",
            "Idle GPU-hours x the price variable; the portal's rate card (MIG, spot and "
            "batch-window prices) is the bill.",
        ),
    ]
    variables = [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "namespace_label", "type": "custom", "query": "namespace,exported_namespace",
         "current": {"text": "namespace", "value": "namespace"}},
        {"name": "pod_label", "type": "custom", "query": "pod,exported_pod",
         "current": {"text": "pod", "value": "pod"}},
        {"name": "namespace", "type": "query", "multi": True, "includeAll": True,
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": "label_values(DCGM_FI_PROF_GR_ENGINE_ACTIVE, ${namespace_label})"},
        {"name": "idle_threshold", "type": "constant", "query": "0.05"},
        {"name": "price_per_gpu_hour", "type": "textbox", "query": "4"},
    ]  # fmt: skip
    return {
        "uid": "gpu-portal-idle",
        "title": "GPU portal: who pays for idle GPUs",
        "tags": ["gpu", "idle", "gpu-portal"],
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": variables},
        "panels": panels,
    }
