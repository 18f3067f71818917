from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("cluster", "0009_gpunode_labels")]

    operations = [
        migrations.AddField(
            model_name="flavorcapacity",
            name="free",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="gpunode",
            name="usable",
            field=models.JSONField(default=dict),
        ),
        migrations.AddField(
            model_name="gpunode",
            name="xids",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
