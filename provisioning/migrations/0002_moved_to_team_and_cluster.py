# "Archived" becomes a field of the team (gpu_requests 0003): the values move
# there. GpuNode and FlavorCapacity move to the cluster app (cluster 0001),
# which takes over their tables as they are.

from django.db import migrations
from django.db.models import OuterRef, Subquery


def archived_to_team(apps, schema_editor):
    Team = apps.get_model("gpu_requests", "Team")
    TeamSync = apps.get_model("provisioning", "TeamSync")
    archived = TeamSync.objects.filter(team=OuterRef("pk")).values("archived_at")[:1]
    Team.objects.filter(sync__archived_at__isnull=False).update(archived_at=Subquery(archived))


def archived_to_sync(apps, schema_editor):
    Team = apps.get_model("gpu_requests", "Team")
    TeamSync = apps.get_model("provisioning", "TeamSync")
    for team_id, archived_at in Team.objects.filter(archived_at__isnull=False).values_list(
        "pk", "archived_at"
    ):
        TeamSync.objects.update_or_create(team_id=team_id, defaults={"archived_at": archived_at})


class Migration(migrations.Migration):

    dependencies = [
        ("gpu_requests", "0003_team_archived_audit_subjects"),
        ("cluster", "0001_initial"),
        ("provisioning", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(archived_to_team, archived_to_sync),
        migrations.RemoveField(model_name="teamsync", name="archived_at"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="FlavorCapacity"),
                migrations.DeleteModel(name="GpuNode"),
            ],
            database_operations=[],
        ),
    ]
