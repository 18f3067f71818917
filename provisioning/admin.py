from django.contrib import admin

from provisioning.models import TeamSync


@admin.register(TeamSync)
class TeamSyncAdmin(admin.ModelAdmin):
    list_display = ["team", "status", "generation", "synced_generation", "last_synced_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in TeamSync._meta.fields]

    def has_add_permission(self, request):
        # A sync row is the portal's record of a team's cluster state: it makes them.
        # (Every field is read-only, so the add page saved a row with no team: a 500.)
        return False
