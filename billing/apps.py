from django.apps import AppConfig


class BillingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "billing"

    def ready(self):
        from billing import actions, pools
        from teams import hooks

        hooks.on_budget_left(actions.budget_left)
        hooks.on_cluster_panel(pools.panel)
