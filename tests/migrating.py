"""Moving the test database between migrations, for the tests of a model's move."""

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The catalog as it was before clusters (cluster/0011): a test of an older move builds
# flavors with models of its time, which know no cluster, so the table must not either.
CATALOG = ("cluster", "0010_capacity_can_run")


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
