# Flavor is the cluster app's now (cluster 0007, on this table): gpu_requests
# forgets it in the state only, after every app's foreign keys point at
# cluster.Flavor, and the table and its rows stay as they are.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0007_flavor_moved_to_cluster'),
        ('gpu_requests', '0009_team_moved_to_teams'),
        ('batch', '0008_flavor_moved_to_cluster'),
        ('billing', '0006_flavor_moved_to_cluster'),
        ('idle', '0003_flavor_moved_to_cluster'),
    ]

    operations = [
        # Same table: a no-op at the database, as the other apps' (sqlmigrate).
        migrations.AlterField(
            model_name='quotarequest',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='quota_requests', to='cluster.flavor'),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Flavor')],
            database_operations=[],
        ),
    ]
