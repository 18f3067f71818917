from django.apps import AppConfig


class GpuRequestsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "gpu_requests"
    verbose_name = "GPU quota"

    def ready(self):
        from cluster import capacity as cluster_capacity
        from gpu_requests import (
            actions,
            capacity,
            timezones,  # noqa: F401  (connects the login receiver)
        )
        from teams import hooks

        # Capacity may not go below approved quota (and what batch adds to it), and
        # every change of it is audited.
        cluster_capacity.register_reserved(capacity.reserved_levels)
        cluster_capacity.on_capacity_changed(actions.record_capacity_change)
        # An archived team's reserved quota is revoked.
        hooks.on_team_archived(actions.team_archived)
