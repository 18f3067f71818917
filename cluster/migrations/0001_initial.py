# GpuNode and FlavorCapacity move here from provisioning with their rows: the
# state is created on the tables provisioning made, then the tables are renamed
# (0002) once provisioning has let go of them.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("gpu_requests", "0003_team_archived_audit_subjects"),
        ("provisioning", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="FlavorCapacity",
                    fields=[
                        (
                            "flavor",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="inventory",
                                serialize=False,
                                to="gpu_requests.flavor",
                            ),
                        ),
                        ("devices", models.PositiveIntegerField(blank=True, null=True)),
                        ("allocated", models.PositiveIntegerField(blank=True, null=True)),
                        ("observed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "override",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Capacity to use instead of the inventory.",
                                null=True,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "flavor capacities",
                        "db_table": "provisioning_flavorcapacity",
                    },
                ),
                migrations.CreateModel(
                    name="GpuNode",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=253, unique=True)),
                        ("pool", models.CharField(blank=True, max_length=253)),
                        ("gpu_model", models.CharField(blank=True, max_length=253)),
                        ("allocatable", models.JSONField(default=dict)),
                        ("allocated", models.JSONField(default=dict)),
                        ("taints", models.JSONField(default=list)),
                        ("cordoned", models.BooleanField(default=False)),
                        ("ready", models.BooleanField(default=True)),
                        ("observed_at", models.DateTimeField()),
                    ],
                    options={"ordering": ["pool", "name"], "db_table": "provisioning_gpunode"},
                ),
            ],
            database_operations=[],
        ),
    ]
