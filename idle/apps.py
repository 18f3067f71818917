from django.apps import AppConfig


class IdleConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "idle"
    verbose_name = "Idle policies"

    def ready(self):
        from gpu_requests import hooks
        from idle import views

        hooks.on_workload_panel(views.workload_panel)
