import os

from celery import Celery, signals

from portal import logs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_prerun.connect
def _drop_broken_connections(task=None, **kwargs):
    """What Django does at each web request, at each task: keep the database
    connection (CELERY_DB_REUSE_MAX) unless it broke or outlived CONN_MAX_AGE.
    Not for a task run eagerly: it runs on its caller's connection, maybe inside
    the caller's transaction, which closing it would break."""
    from django.db import connections

    if task is not None and task.request.is_eager:
        return
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


signals.task_prerun.connect(logs.task_started, weak=False)
signals.task_postrun.connect(logs.task_finished, weak=False)
