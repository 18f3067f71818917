from celery import shared_task

from gpu_requests import actions, emails


@shared_task(name="gpu_requests.advance_lifecycle")
def advance_lifecycle():
    """Activate quota whose period started and expire quota whose period ended."""
    return actions.advance_lifecycle()


@shared_task(name="gpu_requests.send_decision")
def send_decision(event_id):
    """Email the requester about one decision (its AuditEvent's id): rendered and sent
    by a worker, not in the web request that decided. A mail server that is down is
    logged, as it was when the request sent it (emails.send)."""
    emails.send_decision(event_id)
