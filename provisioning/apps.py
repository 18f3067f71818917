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
        # A new team's namespace, as it is on the cluster: one that exists without
        # being the portal's for the team is refused with the team.
        hooks.on_namespace_refusal(actions.namespace_refusal)
        # The team page shows how to reach and use the namespace.
        hooks.on_team_panel(views.namespace_panel)
