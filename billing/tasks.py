"""Thin Celery tasks around billing.actions."""

from celery import shared_task

from billing import actions


@shared_task(name="billing.ingest_closed_hours", acks_late=True)
def ingest_closed_hours():
    """Ingest the hours that closed PORTAL_BILLING_DELAY ago; an outage leaves
    them pending for the next run (the beat interval is the retry)."""
    return actions.ingest_closed_hours()


@shared_task(name="billing.enforce_budgets", acks_late=True)
def enforce_budgets():
    """Hold the GPU work of teams whose running total reached their hard budget, and
    let it go at the month's turn. Idempotent: a lost run is the next one's."""
    return actions.enforce_budgets()
