"""Thin Celery tasks: plain arguments in, an idempotent action called, nothing stored."""

from celery import shared_task

from batch import actions


@shared_task(name="batch.plan", acks_late=True)
def plan(reason=""):
    actions.replan(reason=reason)


@shared_task(name="batch.tick", acks_late=True)
def tick():
    return actions.tick()
