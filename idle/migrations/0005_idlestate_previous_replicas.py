# The replicas a workload had before an idle scale-down move from the object's
# annotation (which the team's members can write) to the database.

import re

from django.db import migrations, models

SCALED = re.compile(r"^Scaled to zero from (\d+) replica\(s\)")


def from_the_log(apps, schema_editor):
    """States scaled down before: the count the scale-down's log row says
    ("Scaled to zero from N replica(s); ..."), which the portal wrote itself. A
    query per such state: only those scaled down and not yet brought back."""
    IdleState = apps.get_model("idle", "IdleState")
    IdleAction = apps.get_model("idle", "IdleAction")
    scaled = IdleState.objects.filter(
        acted_at__isnull=False, kind__in=("Deployment", "StatefulSet")
    )
    for state in scaled.iterator():
        detail = (
            IdleAction.objects.filter(
                namespace=state.namespace,
                workload_kind=state.kind,
                workload_name=state.name,
                kind="scaled_to_zero",
            )
            .order_by("-at", "-pk")
            .values_list("detail", flat=True)
            .first()
        )
        match = SCALED.match(detail or "")
        if match:
            IdleState.objects.filter(pk=state.pk).update(previous_replicas=int(match.group(1)))


class Migration(migrations.Migration):

    dependencies = [
        ('idle', '0004_alter_exemption_reason'),
    ]

    operations = [
        migrations.AddField(
            model_name='idlestate',
            name='previous_replicas',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(from_the_log, migrations.RunPython.noop),
    ]
