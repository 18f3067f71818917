from celery import shared_task

from cluster import actions


@shared_task(name="cluster.record_inventory", acks_late=True)
def record_inventory():
    return actions.record_inventory()
