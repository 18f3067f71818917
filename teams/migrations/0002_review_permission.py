# The permission that makes a platform admin moves from gpu_requests
# (`review_quotarequest` on QuotaRequest) to teams (`review_requests` on Team),
# whose access rules ask for it: every user and group holding the old one holds
# the new one, and the old one goes (gpu_requests 0011 drops it from the state).
# Permissions are made by post_migrate, after every migration: the new one is
# made here when someone holds the old one; a fresh database has neither yet.

from django.conf import settings
from django.db import migrations

OLD = ("gpu_requests", "quotarequest", "review_quotarequest", "Can review quota requests")
NEW = ("teams", "team", "review_requests", "Can review GPU requests")


def permission(apps, db, spec, *, create=False):
    app_label, model, codename, name = spec
    Permission = apps.get_model("auth", "Permission")
    if not create:
        return (
            Permission.objects.using(db)
            .filter(content_type__app_label=app_label, content_type__model=model, codename=codename)
            .first()
        )
    ContentType = apps.get_model("contenttypes", "ContentType")
    content_type, _ = ContentType.objects.using(db).get_or_create(app_label=app_label, model=model)
    found, _ = Permission.objects.using(db).get_or_create(
        content_type=content_type, codename=codename, defaults={"name": name}
    )
    return found


def hand_over(source_spec, target_spec):
    """A migration step: every user and group holding `source` holds `target`
    instead, and `source` is deleted (with its grants)."""

    def run(apps, schema_editor):
        db = schema_editor.connection.alias
        source = permission(apps, db, source_spec)
        if source is None:
            return
        target = permission(apps, db, target_spec, create=True)
        User = apps.get_model(settings.AUTH_USER_MODEL)
        Group = apps.get_model("auth", "Group")
        for through, holder in [
            (User.user_permissions.through, "user_id"),
            (Group.permissions.through, "group_id"),
        ]:
            holders = (
                through.objects.using(db).filter(permission=source).values_list(holder, flat=True)
            )
            through.objects.using(db).bulk_create(
                [through(**{holder: pk}, permission=target) for pk in holders],
                ignore_conflicts=True,
            )
        source.delete()

    return run


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("teams", "0001_initial"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="team",
            options={
                "ordering": ["name"],
                "permissions": [("review_requests", "Can review GPU requests")],
            },
        ),
        migrations.RunPython(hand_over(OLD, NEW), hand_over(NEW, OLD)),
    ]
