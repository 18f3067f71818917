# The audit log (AuditEvent) moves here from gpu_requests with its rows: the model
# is created in the state only, on the table gpu_requests made (it keeps its
# name, `Meta.db_table`), and gpu_requests lets go of it in its 0013. Its quota
# request became its generic subject first (gpu_requests 0012 and 0013), so
# nothing here points at gpu_requests. The content type moves too, so the
# permissions and admin log entries about audit events still find it.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import teams.models


def content_type_to_teams(apps, schema_editor):
    # A fresh database has none yet: post_migrate creates it as teams'.
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="gpu_requests", model="auditevent"
    ).update(app_label="teams")


def content_type_to_gpu_requests(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="teams", model="auditevent"
    ).update(app_label="gpu_requests")


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("teams", "0002_review_permission"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        # The table as gpu_requests left it: no quota_request column.
        ("gpu_requests", "0013_audit_quota_request_column_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("subject_id", models.CharField(blank=True, max_length=64)),
                        ("action", models.CharField(choices=teams.models.audit_actions, max_length=32)),
                        ("from_status", models.CharField(blank=True, max_length=16)),
                        ("to_status", models.CharField(blank=True, max_length=16)),
                        ("reason", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("actor", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ("subject_type", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="contenttypes.contenttype")),
                        ("team", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name="audit_events", to="teams.team")),
                    ],
                    options={
                        "db_table": "gpu_requests_auditevent",
                        "ordering": ["created_at", "pk"],
                        "indexes": [
                            models.Index(fields=["subject_type", "subject_id"], name="gpu_request_subject_2537ed_idx"),
                            models.Index(models.F("team"), models.OrderBy(models.F("created_at"), descending=True), name="audit_team_newest"),
                            models.Index(models.F("team"), models.F("subject_type"), models.OrderBy(models.F("created_at"), descending=True), models.OrderBy(models.F("id"), descending=True), condition=models.Q(("actor__isnull", False), models.Q(("action", "submit"), _negated=True)), name="audit_team_decisions"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_to_teams, content_type_to_gpu_requests),
    ]
