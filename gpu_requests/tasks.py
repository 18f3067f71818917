from celery import shared_task

from gpu_requests import actions


@shared_task(name="gpu_requests.advance_lifecycle")
def advance_lifecycle():
    """Activate quota whose period started and expire quota whose period ended."""
    return actions.advance_lifecycle()
