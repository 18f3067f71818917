# The GPU catalog (Flavor) moves here from gpu_requests with its rows: the model
# is created in the state only, on the table gpu_requests made (it keeps its
# name, `Meta.db_table`), and gpu_requests lets go of it in its 0010 once every
# app's foreign keys point here. The content type moves too, so the audit
# events about a flavor (capacity changes), its permissions and admin log
# entries still find it.

from decimal import Decimal

import django.core.validators
import django.db.models.deletion
import django.db.models.functions.text
from django.db import migrations, models


def content_type_to_cluster(apps, schema_editor):
    # A fresh database has none yet: post_migrate creates it as cluster's.
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="gpu_requests", model="flavor"
    ).update(app_label="cluster")


def content_type_to_gpu_requests(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="cluster", model="flavor"
    ).update(app_label="gpu_requests")


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("cluster", "0006_team_moved_to_teams"),
        # The table as gpu_requests left it.
        ("gpu_requests", "0009_team_moved_to_teams"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Flavor',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('slug', models.SlugField(unique=True)),
                        ('gpu_model', models.CharField(max_length=100)),
                        ('memory_gb', models.PositiveIntegerField(verbose_name='memory (GB)')),
                        ('sharing', models.CharField(choices=[('whole', 'Whole GPU'), ('mig', 'MIG slice'), ('time-sliced', 'Time-sliced')], default='whole', max_length=16)),
                        ('resource_name', models.CharField(default='nvidia.com/gpu', max_length=253, validators=[django.core.validators.RegexValidator('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$', 'Not a Kubernetes resource name, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb.')])),
                        ('node_selector', models.JSONField(blank=True, default=dict)),
                        ('tolerations', models.JSONField(blank=True, default=list)),
                        ('device_class', models.CharField(blank=True, help_text='Set for a DRA flavor (e.g. gpu.nvidia.com); empty for an extended resource.', max_length=200, validators=[django.core.validators.RegexValidator('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$', "Not a DeviceClass name: lowercase letters, digits, '-' and '.', e.g. gpu.nvidia.com.")], verbose_name='DeviceClass')),
                        ('device_selector', models.TextField(blank=True, help_text='DRA flavors only: narrows the class\'s devices, e.g. device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3" && device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', verbose_name='device selector (CEL)')),
                        ('capacity', models.PositiveIntegerField(help_text='Devices of this flavor in the cluster.')),
                        ('price_per_gpu_hour', models.DecimalField(decimal_places=4, max_digits=10, validators=[django.core.validators.MinValueValidator(Decimal('0'))])),
                        ('is_active', models.BooleanField(default=True)),
                    ],
                    options={
                        'db_table': 'gpu_requests_flavor',
                        'ordering': ['name'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('device_class', ''), ('resource_name', django.db.models.functions.text.Concat(models.F('device_class'), models.Value('.deviceclass.resource.k8s.io/devices'))), _connector='OR'), name='dra_flavor_resource_is_its_class'), models.CheckConstraint(condition=models.Q(models.Q(('device_class', ''), _negated=True), ('device_selector', ''), _connector='OR'), name='device_selector_needs_a_class')],
                    },
                ),
            ],
            database_operations=[],
        ),
        # Same table: no-ops at the database, as the other apps' (sqlmigrate).
        migrations.AlterField(
            model_name='draallocation',
            name='flavor',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='cluster.flavor'),
        ),
        migrations.AlterField(
            model_name='flavorcapacity',
            name='flavor',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='inventory', serialize=False, to='cluster.flavor'),
        ),
        migrations.RunPython(content_type_to_cluster, content_type_to_gpu_requests),
    ]
