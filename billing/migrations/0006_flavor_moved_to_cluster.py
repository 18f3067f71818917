# Flavor moved to cluster (cluster 0007): the foreign keys follow it, on the same table.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0005_team_moved_to_teams'),
        ('cluster', '0007_flavor_moved_to_cluster'),
    ]

    operations = [
        migrations.AlterField(
            model_name='flavorhour',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='rate',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='rates', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='rate',
            name='mig_parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='teamusage',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='workloadusage',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='cluster.flavor'),
        ),
    ]
