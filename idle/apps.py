from django.apps import AppConfig


class IdleConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "idle"
    verbose_name = "Idle policies"
