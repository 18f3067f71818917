"""Thin Celery tasks around idle.actions."""

import logging

from celery import shared_task

from billing.prometheus import PrometheusError
from idle import actions

log = logging.getLogger(__name__)


@shared_task(name="idle.evaluate", acks_late=True, ignore_result=True)
def evaluate():
    """Every minute from beat. Prometheus out of reach: the next minute tries
    again (idle time is counted from the state kept, not lost)."""
    try:
        result = actions.evaluate()
    except PrometheusError as exc:
        log.warning("idle evaluation skipped: %s", exc)
        return
    log.info(
        "idle: %d workloads, %d idle, %d announced, %d withdrawn, %d acted on",
        result.workloads,
        result.idle,
        len(result.announced),
        len(result.withdrawn),
        len(result.acted),
    )
