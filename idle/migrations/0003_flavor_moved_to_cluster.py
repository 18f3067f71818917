# Flavor moved to cluster (cluster 0007): the foreign keys follow it, on the same table.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0007_flavor_moved_to_cluster'),
        ('idle', '0002_team_moved_to_teams'),
    ]

    operations = [
        migrations.AlterField(
            model_name='idleaction',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='idlepolicy',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='idle_policies', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='idlestate',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='cluster.flavor'),
        ),
    ]
