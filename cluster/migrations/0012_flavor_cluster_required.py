import cluster.models
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Apart from 0011: PostgreSQL refuses to alter a table whose rows the same
    transaction updated while their foreign keys' checks are still pending."""

    dependencies = [
        ("cluster", "0011_clusters"),
    ]

    operations = [
        migrations.AlterField(
            model_name='flavor',
            name='cluster',
            field=models.ForeignKey(default=cluster.models.default_cluster, on_delete=django.db.models.deletion.PROTECT, related_name='flavors', to='cluster.cluster'),
        ),
    ]
