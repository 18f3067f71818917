"""Thin Celery tasks around billing.actions."""

from celery import shared_task

from billing import actions


@shared_task(name="billing.ingest_closed_hours", acks_late=True)
def ingest_closed_hours():
    """Ingest the hours that closed PORTAL_BILLING_DELAY ago; an outage leaves
    them pending for the next run (the beat interval is the retry)."""
    return actions.ingest_closed_hours()
