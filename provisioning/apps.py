from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    verbose_name = "Cluster provisioning"

    def ready(self):
        from provisioning import actions, views
        from teams import hooks

        # A change of quota, membership or archive is a change of the team's
        # namespace: sync it (on commit, through the outbox).
        hooks.on_quota_changed(actions.team_changed, many=actions.teams_changed)
        hooks.on_members_changed(actions.members_changed)
        # The team page shows how to reach and use the namespace.
        hooks.on_team_panel(views.namespace_panel)
