"""The delivery log in the Django admin too (read-only: hooks change on their pages,
where the secret is shown once and each change is an audit event)."""

from django.contrib import admin

from notifications.models import Delivery
from teams.admin import ReadOnlyAdminMixin


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "created_at", "hook", "event", "status", "attempts", "response_code"]
    list_filter = ["status", "event"]
    list_select_related = ["webhook__team"]
    fields = [
        "hook",
        "event",
        "status",
        "attempts",
        "response_code",
        "error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
        "body",
    ]
    readonly_fields = fields
    ordering = ["-created_at", "-pk"]

    @admin.display(description="Hook")
    def hook(self, delivery):
        return delivery.webhook.team or "admins"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
