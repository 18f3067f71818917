from django.apps import AppConfig


class IdleConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "idle"
    verbose_name = "Idle policies"

    def ready(self):
        from idle import showback, views
        from teams import hooks

        hooks.on_workload_panel(views.workload_panel)
        hooks.on_team_panel(views.scaled_panel)
        hooks.on_spend_panel(showback.spend_panel)
        hooks.on_team_panel(views.policies_panel)
