from django.apps import AppConfig


class BillingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "billing"

    def ready(self):
        from billing import actions, health, pools, views
        from cluster import capacity
        from teams import hooks

        # What an XID took out of service is not capacity (cluster.inventory).
        capacity.register_gpu_health(health.unusable_gpus)
        hooks.on_budget_left(actions.budget_left)
        # A spent hard budget caps the team's namespace at what runs; its page says why.
        hooks.on_quota_cap(actions.held_namespaces)
        hooks.on_team_panel(views.budget_panel)
        hooks.on_dashboard_note(views.unused_quota_notes)
        hooks.on_cluster_panel(pools.panel)
