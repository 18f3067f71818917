from django.contrib import admin

from cluster import actions
from cluster.models import FlavorCapacity, GpuNode
from gpu_requests.actions import can_review


@admin.register(FlavorCapacity)
class FlavorCapacityAdmin(admin.ModelAdmin):
    list_display = ["flavor", "devices", "allocated", "observed_at", "override"]
    readonly_fields = ["flavor", "devices", "allocated", "observed_at"]

    def has_add_permission(self, request):
        return False  # rows come from the inventory

    def has_change_permission(self, request, obj=None):
        return can_review(request.user) and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        # Through the action, so approvals use the new capacity at once.
        actions.set_capacity_override(obj.flavor, obj.override, by=request.user)


@admin.register(GpuNode)
class GpuNodeAdmin(admin.ModelAdmin):
    list_display = ["name", "pool", "gpu_model", "cordoned", "ready", "observed_at"]
