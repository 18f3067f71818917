"""Admin: the rate card is append-only (rows are added through the action,
never edited), budgets are set through the action, hours are read-only."""

from contextlib import contextmanager

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError

from billing import actions
from billing.models import Budget, IngestedHour, Rate
from teams import errors
from teams.admin import SafeAutocompleteMixin
from teams.formats import money


class RateForm(forms.ModelForm):
    class Meta:
        model = Rate
        fields = ["flavor", "effective_from", "price_per_gpu_hour", "mig_parent", "mig_basis"]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            actions.validate_rate(
                data["flavor"],
                data["effective_from"],
                price=data.get("price_per_gpu_hour"),
                mig_parent=data.get("mig_parent"),
                mig_basis=data.get("mig_basis", ""),
            )
        except ValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        return data


@admin.register(Rate)
class RateAdmin(admin.ModelAdmin):
    form = RateForm
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
        # Through the action (which re-prices the ledger); the form validated it.
        rate = actions.add_rate(
            obj.flavor,
            obj.effective_from,
            price=obj.price_per_gpu_hour,
            mig_parent=obj.mig_parent,
            mig_basis=obj.mig_basis,
            by=request.user,
        )
        obj.pk = rate.pk


@admin.register(Budget)
class BudgetAdmin(SafeAutocompleteMixin, admin.ModelAdmin):
    """Through `actions.set_budget`, as on the Spend page: audited, and a spent hard
    budget raised above the team's running total lets its GPU work go at once."""

    list_display = ["team", "amount", "mode", "when_spent", "spent_at", "updated_at"]
    list_filter = ["mode"]
    fields = ["team", "monthly_amount", "mode", "when_spent", "spent_at"]
    readonly_fields = ["spent_at"]
    autocomplete_fields = ["team"]

    def get_readonly_fields(self, request, obj=None):
        return ["team"] if obj is not None else []

    @admin.display(description="Monthly amount", ordering="monthly_amount")
    def amount(self, budget):
        return money(budget.monthly_amount)

    def save_model(self, request, obj, form, change):
        with _refused_as_403():
            budget = actions.set_budget(
                obj.team,
                obj.monthly_amount,
                by=request.user,
                mode=obj.mode,
                when_spent=obj.when_spent,
            )
        obj.pk = budget.pk

    def delete_model(self, request, obj):
        with _refused_as_403():
            actions.set_budget(obj.team, None, by=request.user)

    def delete_queryset(self, request, queryset):
        for budget in queryset.select_related("team"):
            self.delete_model(request, budget)


@contextmanager
def _refused_as_403():
    try:
        yield
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None


@admin.register(IngestedHour)
class IngestedHourAdmin(admin.ModelAdmin):
    list_display = ["hour", "status", "attempts", "last_error", "ingested_at"]
    list_filter = ["status"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
