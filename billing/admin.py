"""Admin: the rate card is append-only (rows are added through the action,
never edited), budgets are set through the action, hours are read-only."""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from billing import actions
from billing.models import Budget, IngestedHour, Rate


@admin.register(Rate)
class RateAdmin(admin.ModelAdmin):
    list_display = [
        "flavor",
        "effective_from",
        "price_per_gpu_hour",
        "mig_parent",
        "mig_basis",
        "created_by",
    ]
    list_filter = ["flavor"]
    fields = ["flavor", "effective_from", "price_per_gpu_hour", "mig_parent", "mig_basis"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        try:
            actions.add_rate(
                obj.flavor,
                obj.effective_from,
                price=obj.price_per_gpu_hour,
                mig_parent=obj.mig_parent,
                mig_basis=obj.mig_basis,
                by=request.user,
            )
        except (ValidationError, actions.quota_actions.NotAllowed) as exc:
            self.message_user(request, "; ".join(_messages(exc)), messages.ERROR)


def _messages(exc):
    if isinstance(exc, ValidationError):
        return [f"{field}: {' '.join(texts)}" for field, texts in exc.message_dict.items()]
    return [str(exc)]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["team", "monthly_amount", "updated_at"]
    autocomplete_fields = ["team"]


@admin.register(IngestedHour)
class IngestedHourAdmin(admin.ModelAdmin):
    list_display = ["hour", "status", "attempts", "last_error", "ingested_at"]
    list_filter = ["status"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
