from django.contrib import admin
from django.core.exceptions import ValidationError

from cluster import actions, capacity
from cluster.models import Cluster, FlavorCapacity, GpuNode
from teams.access import can_review

STATE = ["reachable", *Cluster.OBSERVED]


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "region", "reachable", "version", "inventory_at"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = STATE
    fieldsets = [
        (None, {"fields": ["name", "slug", "region"]}),
        (
            "How the portal reaches it",
            {
                "fields": ["kubeconfig", "context", "prometheus_url", "prometheus_label"],
                "description": "docs/clusters.md says what identity the portal needs there.",
            },
        ),
        ("What the inventory last found", {"fields": STATE}),
    ]

    def has_change_permission(self, request, obj=None):
        return can_review(request.user) and super().has_change_permission(request, obj)


@admin.register(FlavorCapacity)
class FlavorCapacityAdmin(admin.ModelAdmin):
    list_display = ["flavor", "devices", "allocated", "observed_at", "override"]
    readonly_fields = ["flavor", "devices", "allocated", "observed_at"]

    def has_add_permission(self, request):
        return False  # rows come from the inventory

    def has_change_permission(self, request, obj=None):
        return can_review(request.user) and super().has_change_permission(request, obj)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class OverrideForm(form):
            def clean_override(self):
                override = self.cleaned_data["override"]
                pinned = override if override is not None else obj.devices
                if obj is not None and pinned is not None and pinned < obj.flavor.capacity:
                    try:
                        capacity.check_capacity(obj.flavor, pinned)
                    except capacity.OverCommitted as exc:
                        raise ValidationError(str(exc)) from None
                return override

        return OverrideForm

    def save_model(self, request, obj, form, change):
        # Through the action, so approvals use the new capacity at once.
        actions.set_capacity_override(obj.flavor, obj.override, by=request.user)


@admin.register(GpuNode)
class GpuNodeAdmin(admin.ModelAdmin):
    list_display = ["name", "pool", "gpu_model", "cordoned", "ready", "observed_at"]
