from celery import shared_task

from notifications import actions


@shared_task(bind=True, name="notifications.deliver", ignore_result=True)
def deliver(self, delivery_id):
    """One attempt at a webhook delivery; a failure worth retrying comes back after
    the backoff (the attempts are counted, and bounded, in the database)."""
    delay = actions.deliver(delivery_id)
    if delay is not None:
        raise self.retry(countdown=delay, max_retries=None)


@shared_task(name="notifications.enqueue", ignore_result=True)
def enqueue(delivery_ids):
    """The deliveries one change made, queued a message each (the web request that
    made them sends this one message instead)."""
    actions.deliveries.enqueue(delivery_ids)


@shared_task(name="notifications.sweep", ignore_result=True)
def sweep():
    return actions.sweep()


@shared_task(name="notifications.prune", ignore_result=True)
def prune():
    return actions.prune()
