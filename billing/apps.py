from django.apps import AppConfig


class BillingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "billing"

    def ready(self):
        from billing import actions, pools, views
        from teams import hooks

        hooks.on_budget_left(actions.budget_left)
        # A spent hard budget caps the team's namespace at what runs; its page says why.
        hooks.on_quota_cap(actions.held_namespaces)
        hooks.on_team_panel(views.budget_panel)
        hooks.on_dashboard_note(views.unused_quota_notes)
        hooks.on_cluster_panel(pools.panel)
