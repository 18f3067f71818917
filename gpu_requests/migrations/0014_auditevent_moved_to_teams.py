# AuditEvent is the teams app's now (teams 0003, on this table): gpu_requests
# forgets it in the state only, and the table and its rows stay as they are.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("gpu_requests", "0013_audit_quota_request_column_dropped"),
        ("teams", "0003_auditevent_moved_to_teams"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditEvent")],
            database_operations=[],
        ),
    ]
