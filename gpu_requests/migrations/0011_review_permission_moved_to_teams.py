# The review permission is teams' now (teams 0002 handed every grant of it
# over and deleted the old row): QuotaRequest declares it no more.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('gpu_requests', '0010_flavor_moved_to_cluster'),
        ('teams', '0002_review_permission'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='quotarequest',
            options={'ordering': ['-created_at', '-pk']},
        ),
    ]
