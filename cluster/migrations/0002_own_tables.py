from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0001_initial"),
        ("provisioning", "0002_moved_to_team_and_cluster"),
    ]

    operations = [
        migrations.AlterModelTable(name="flavorcapacity", table=None),
        migrations.AlterModelTable(name="gpunode", table=None),
    ]
