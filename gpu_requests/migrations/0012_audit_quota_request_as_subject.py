# An audit event names its quota request as its generic subject, like every
# other subject (a flavor, a webhook), and no longer by a foreign key: the audit
# log can then move down to the teams app, which may not point at gpu_requests.
# The rows that had `quota_request` get it as their subject here, and 0013
# drops the column; backwards, the column comes back and the rows whose subject
# is a quota request get it again. What the PROTECT key kept (no request deleted with its
# history) `QuotaRequest.events` keeps now (gpu_requests.models.AuditHistory).

from django.db import migrations, models
from django.db.models.functions import Cast


def _request_type(apps, schema_editor, create):
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.db_manager(schema_editor.connection.alias)
    if create:  # a database with events about requests has it, unless made by hand
        return types.get_or_create(app_label="gpu_requests", model="quotarequest")[0]
    return types.filter(app_label="gpu_requests", model="quotarequest").first()


def quota_request_to_subject(apps, schema_editor):
    AuditEvent = apps.get_model("gpu_requests", "AuditEvent")
    events = AuditEvent.objects.using(schema_editor.connection.alias)
    about_requests = events.filter(quota_request__isnull=False)
    if not about_requests.exists():
        return
    # The portal never wrote both (AuditEvent.record set one or the other); a row
    # that has both would lose one of them here: stop and say so instead.
    both = about_requests.filter(subject_type__isnull=False)
    if both.exists():
        raise RuntimeError(
            f"Audit events {sorted(both.values_list('pk', flat=True))} name both a quota "
            "request and another subject; give each one subject before migrating."
        )
    about_requests.update(
        subject_type=_request_type(apps, schema_editor, create=True),
        subject_id=Cast("quota_request_id", models.CharField()),
    )


def subject_to_quota_request(apps, schema_editor):
    request_type = _request_type(apps, schema_editor, create=False)
    if request_type is None:
        return
    AuditEvent = apps.get_model("gpu_requests", "AuditEvent")
    AuditEvent.objects.using(schema_editor.connection.alias).filter(
        subject_type=request_type
    ).update(
        quota_request_id=Cast("subject_id", models.BigIntegerField()),
        subject_type=None,
        subject_id="",
    )


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("gpu_requests", "0011_review_permission_moved_to_teams"),
    ]

    operations = [
        # Alone: on PostgreSQL the updated rows' deferred foreign-key checks would
        # refuse the ALTER TABLE of 0013 in the same transaction.
        migrations.RunPython(quota_request_to_subject, subject_to_quota_request),
    ]
