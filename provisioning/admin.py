from django.contrib import admin

from provisioning.models import TeamSync


@admin.register(TeamSync)
class TeamSyncAdmin(admin.ModelAdmin):
    list_display = ["team", "status", "generation", "synced_generation", "last_synced_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in TeamSync._meta.fields]
