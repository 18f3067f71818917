"""The one module that talks to Prometheus (its HTTP API, `PORTAL_PROMETHEUS_URL`).

Every call has a timeout; every failure becomes `PrometheusError` (or
`NotConfigured` when no URL is set), so callers never see urllib's exceptions.
A query that Prometheus itself refuses (bad PromQL, too many points) is a
`QueryError`: retrying cannot help. Anything else (refused connection,
timeout, 5xx) is `PrometheusUnavailable`: the hour stays pending and is retried.
"""

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from django.conf import settings


class PrometheusError(Exception):
    pass


class NotConfigured(PrometheusError):
    pass


class PrometheusUnavailable(PrometheusError):
    pass


class QueryError(PrometheusError):
    pass


@dataclass
class Series:
    labels: dict
    # [(unix seconds, float)] in time order; NaN samples are dropped.
    points: list


def _get(path, params, *, base_url=None, timeout=None):
    base = base_url if base_url is not None else settings.PORTAL_PROMETHEUS_URL
    if not base:
        raise NotConfigured("PORTAL_PROMETHEUS_URL is not set")
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    timeout = timeout or settings.PORTAL_PROMETHEUS_TIMEOUT
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        detail = _error_text(exc.read())
        if exc.code in (400, 422):
            raise QueryError(f"Prometheus refused the query: {detail}") from None
        raise PrometheusUnavailable(f"Prometheus answered {exc.code}: {detail}") from None
    except (OSError, ValueError) as exc:  # URLError, timeouts, resets
        raise PrometheusUnavailable(f"Prometheus at {base} is unreachable: {exc}") from None
    try:
        payload = json.loads(body)
    except ValueError:
        raise PrometheusUnavailable("Prometheus answered something that is not JSON") from None
    if payload.get("status") != "success":
        raise QueryError(f"Prometheus refused the query: {payload.get('error')}")
    return payload["data"]


def _error_text(body):
    try:
        return json.loads(body).get("error") or body[:200].decode(errors="replace")
    except ValueError:
        return body[:200].decode(errors="replace")


def _points(values):
    points = []
    for timestamp, value in values:
        number = float(value)
        if not math.isnan(number):
            points.append((float(timestamp), number))
    return points


def query_range(promql, start, end, step, **kwargs):
    """[Series] of a range query over [start, end] (aware datetimes), `step` seconds."""
    data = _get(
        "/api/v1/query_range",
        {"query": promql, "start": start.timestamp(), "end": end.timestamp(), "step": step},
        **kwargs,
    )
    return [Series(item["metric"], _points(item["values"])) for item in data["result"]]


def query(promql, at=None, **kwargs):
    """[Series] of an instant query (each with one point)."""
    params = {"query": promql}
    if at is not None:
        params["time"] = at.timestamp()
    data = _get("/api/v1/query", params, **kwargs)
    if data["resultType"] != "vector":
        raise QueryError(f"expected an instant vector, got {data['resultType']}")
    return [Series(item["metric"], _points([item["value"]])) for item in data["result"]]


def is_ready(**kwargs):
    """True if Prometheus answers a trivial query (for the pages' status line)."""
    try:
        query("vector(1)", **kwargs)
    except PrometheusError:
        return False
    return True
