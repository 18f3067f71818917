# Flavor moved to cluster (cluster 0007): the foreign keys follow it, on the same table.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('batch', '0007_team_moved_to_teams'),
        ('cluster', '0007_flavor_moved_to_cluster'),
    ]

    operations = [
        migrations.AlterField(
            model_name='batchjob',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='batch_jobs', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='windowcapacity',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='batch_capacities', to='cluster.flavor'),
        ),
    ]
