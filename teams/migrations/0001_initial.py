# Team and Membership move here from gpu_requests with their rows: the models
# are created in the state only, on the tables gpu_requests made (they keep
# their names, `Meta.db_table`), and gpu_requests lets go of them in its 0009
# once every app's foreign keys point here. The content types move too, so the
# audit events, permissions and admin log entries about teams still find them.

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ["team", "membership"]


def content_types_to_teams(apps, schema_editor):
    # A fresh database has none yet: post_migrate creates them as teams'.
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="gpu_requests", model__in=MOVED
    ).update(app_label="teams")


def content_types_to_gpu_requests(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="teams", model__in=MOVED
    ).update(app_label="gpu_requests")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        # The tables as gpu_requests left them.
        ("gpu_requests", "0008_dra_flavors"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Team",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        (
                            "slug",
                            models.CharField(
                                max_length=63,
                                unique=True,
                                validators=[
                                    django.core.validators.RegexValidator(
                                        "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                                        "Use 1-63 lowercase letters, digits or '-', starting and "
                                        "ending with a letter or digit (it becomes a Kubernetes "
                                        "namespace name).",
                                    )
                                ],
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("archived_at", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={"db_table": "gpu_requests_team", "ordering": ["name"]},
                ),
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "role",
                            models.CharField(
                                choices=[("member", "Member"), ("manager", "Manager")],
                                default="member",
                                max_length=16,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="teams.team",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "gpu_requests_membership",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team", "user"), name="one_membership"
                            )
                        ],
                    },
                ),
                migrations.AddField(
                    model_name="team",
                    name="members",
                    field=models.ManyToManyField(
                        related_name="teams", through="teams.Membership", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_to_teams, content_types_to_gpu_requests),
    ]
