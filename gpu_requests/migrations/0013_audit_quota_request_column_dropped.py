# The quota request of an audit event is its subject now (0012 copied it there):
# the foreign key goes, and the dashboard's index names the subject's kind
# instead (its rows: quota requests' decisions, which the dashboard asks for).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("gpu_requests", "0012_audit_quota_request_as_subject"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="auditevent", name="audit_team_decisions"),
        migrations.RemoveField(model_name="auditevent", name="quota_request"),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(
                models.F("team"),
                models.F("subject_type"),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(
                    ("actor__isnull", False), models.Q(("action", "submit"), _negated=True)
                ),
                name="audit_team_decisions",
            ),
        ),
    ]
