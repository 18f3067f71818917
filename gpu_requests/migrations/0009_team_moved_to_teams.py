# Team and Membership are the teams app's now (teams 0001, on these tables):
# gpu_requests forgets them in the state only, after every app's foreign keys
# point at teams.Team, and the tables and their rows stay as they are.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("gpu_requests", "0008_dra_flavors"),
        ("teams", "0001_initial"),
        ("batch", "0007_team_moved_to_teams"),
        ("billing", "0005_team_moved_to_teams"),
        ("cluster", "0006_team_moved_to_teams"),
        ("idle", "0002_team_moved_to_teams"),
        ("notifications", "0002_team_moved_to_teams"),
        ("provisioning", "0004_team_moved_to_teams"),
    ]

    operations = [
        # Same table: no-ops at the database, as the other apps' (sqlmigrate).
        migrations.AlterField(
            model_name="auditevent",
            name="team",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="audit_events",
                to="teams.team",
            ),
        ),
        migrations.AlterField(
            model_name="quotarequest",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="quota_requests",
                to="teams.team",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="team", name="members"),
                migrations.DeleteModel(name="Membership"),
                migrations.DeleteModel(name="Team"),
            ],
            database_operations=[],
        ),
    ]
