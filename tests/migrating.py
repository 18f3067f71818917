"""Moving the test database between migrations, for the tests of a model's move."""

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_back(targets, *, state):
    """The database migrated to `targets`; the models (historical ones) at `state`."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(state).apps


def migrate_forward():
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    # Content types are cached by id and by name for the process: read them again.
    ContentType.objects.clear_cache()
