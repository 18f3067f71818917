from django.contrib import admin, messages
from django.contrib.contenttypes.admin import GenericTabularInline
from django.contrib.contenttypes.prefetch import GenericPrefetch
from django.core.exceptions import ValidationError

from cluster import capacity
from cluster.models import Flavor
from gpu_requests import actions
from gpu_requests.models import QuotaAction, QuotaRequest
from teams import access, errors
from teams.admin import ReadOnlyAdminMixin
from teams.formats import money
from teams.models import AuditEvent

admin.site.site_header = "GPU portal administration"
admin.site.site_title = "GPU portal admin"
admin.site.index_title = "Teams, catalog and quota"
admin.site.site_url = "/"


@admin.register(Flavor)
class FlavorAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "slug",
        "cluster",
        "sharing",
        "held_as",
        "capacity",
        "price_per_gpu_hour",
        "is_active",
    ]
    list_filter = ["cluster", "sharing", "is_active"]
    prepopulated_fields = {"slug": ["name"]}
    fieldsets = [
        (None, {"fields": ["cluster", "name", "slug", "gpu_model", "memory_gb", "sharing"]}),
        (
            "Held as an extended resource",
            {
                "fields": ["resource_name", "node_selector"],
                "description": "For GPUs a device plugin publishes (nvidia.com/gpu, "
                "nvidia.com/mig-1g.10gb): pods ask for the resource on nodes with these labels.",
            },
        ),
        (
            "Or held by Dynamic Resource Allocation",
            {
                "fields": ["device_class", "device_selector"],
                "description": "For GPUs a DRA driver publishes as ResourceSlices: set the "
                "DeviceClass, and the resource name becomes the class's quota key. The "
                "selector is a subset of CEL (docs/dra.md): a conjunction of "
                'device.driver == "...", device.attributes["domain"].name == value and '
                'device.capacity["domain"].name.compareTo(quantity("40Gi")) >= 0.',
            },
        ),
        (None, {"fields": ["tolerations", "capacity", "price_per_gpu_hour", "is_active"]}),
    ]

    @admin.display(description="held as")
    def held_as(self, flavor):
        return flavor.held_as

    def get_readonly_fields(self, request, obj=None):
        # Once the cluster inventory counts a flavor, its capacity comes from
        # there (or from the override on the inventory's page), not from here;
        # and only platform admins change it.
        inventory = getattr(obj, "inventory", None)
        counted = inventory is not None and inventory.observed_at is not None
        if obj is not None and (counted or not access.can_review(request.user)):
            return ["capacity"]
        return []

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if obj is None or "capacity" not in form.base_fields:
            return form

        class CapacityForm(form):
            def clean_capacity(self):
                gpus = self.cleaned_data["capacity"]
                if gpus is not None and gpus < obj.capacity:
                    try:
                        capacity.check_capacity(obj, gpus)
                    except capacity.OverCommitted as exc:
                        raise ValidationError(str(exc)) from None
                return gpus

        return CapacityForm

    def save_model(self, request, obj, form, change):
        gpus = obj.capacity
        if change and "capacity" in form.changed_data:
            # Through the action: checked again under the approvals' lock, audited.
            obj.capacity = form.initial["capacity"]
            super().save_model(request, obj, form, change)
            capacity.change_capacity(obj, gpus, by=request.user)
            obj.capacity = gpus
        else:
            super().save_model(request, obj, form, change)


class AuditEventInline(GenericTabularInline):
    model = AuditEvent
    ct_field, ct_fk_field = "subject_type", "subject_id"
    extra = 0
    can_delete = False
    fields = ["created_at", "actor", "action", "from_status", "to_status", "reason"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


def _transition(action):
    """An admin bulk action that goes through `actions.<action>` for each request."""
    action = str(action)
    label = AuditEvent.label_of(action).lower()

    def run(modeladmin, request, queryset):
        done = 0
        for quota_request in queryset.select_related("team", "flavor"):
            try:
                getattr(actions, action)(quota_request, by=request.user, reason="Django admin")
                done += 1
            except errors.ActionError as exc:
                modeladmin.message_user(request, str(exc), messages.ERROR)
        if done:
            modeladmin.message_user(request, f"{done} request(s) {label}.", messages.SUCCESS)

    run.__name__ = f"{action}_selected"
    run.short_description = f"{action.title()} selected requests"
    run.allowed_permissions = ["review"]
    return run


@admin.register(QuotaRequest)
class QuotaRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "team", "flavor", "gpus", "starts_at", "ends_at", "status", "cost"]
    list_select_related = ["team", "flavor"]
    list_filter = ["status", "flavor", "team"]
    date_hierarchy = "starts_at"
    # A request changes only through the actions (below, and in the portal):
    # editing its period or count here would skip the capacity check and the audit.
    readonly_fields = [field.name for field in QuotaRequest._meta.fields]
    inlines = [AuditEventInline]
    actions = [
        _transition(QuotaAction.APPROVE),
        _transition(QuotaAction.REJECT),
        _transition(QuotaAction.REVOKE),
    ]

    def has_add_permission(self, request):
        return False  # requests are made in the portal, where they are validated

    def has_delete_permission(self, request, obj=None):
        return False  # its audit history must outlive it

    def has_review_permission(self, request):
        return access.can_review(request.user)

    @admin.display(description="Estimated cost", ordering="estimated_cost")
    def cost(self, quota_request):
        return money(quota_request.estimated_cost) or "open-ended"


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "team", "quota_request", "actor", "action", "to_status"]
    list_filter = ["action", "team"]
    # The columns' objects join the list's query, the subjects come in a query a
    # kind (a request's name needs its team and flavor): no query per row.
    list_select_related = ["team", "actor"]

    def get_queryset(self, request):
        requests = QuotaRequest.objects.select_related("team", "flavor")
        return (
            super().get_queryset(request).prefetch_related(GenericPrefetch("subject", [requests]))
        )

    @admin.display(description="quota request")
    def quota_request(self, event):
        return event.subject if isinstance(event.subject, QuotaRequest) else None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
