"""Admin: policies are set and removed through the actions (audited);
exemptions, states and the log are read here."""

import contextlib

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from idle import actions
from idle.models import Exemption, IdleAction, IdlePolicy, IdleState
from teams import errors


class PolicyForm(forms.ModelForm):
    class Meta:
        model = IdlePolicy
        fields = ["flavor", "team", "idle_minutes", "grace_minutes", "mode", "enabled"]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        flavor = data.get("flavor", self.instance.flavor if self.instance.pk else None)
        team = data.get("team", self.instance.team if self.instance.pk else None)
        base = IdlePolicy.objects.filter(flavor=flavor, team=None).first()
        if team is not None:
            looser = IdlePolicy(**{k: data[k] for k in actions.FIELDS}).looser_fields(base)
            if looser:
                raise ValidationError(looser)
        return data


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    form = PolicyForm
    list_display = ["flavor", "team", "idle_minutes", "grace_minutes", "mode", "enabled"]
    list_filter = ["flavor", "mode", "enabled"]

    def get_readonly_fields(self, request, obj=None):
        # Which policy it is does not change; another flavor or team is another policy.
        return ["flavor", "team"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        saved = actions.set_policy(
            obj.flavor if change else data["flavor"],
            obj.team if change else data["team"],
            by=request.user,
            **{field: data[field] for field in actions.FIELDS},
        )
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        self.delete_queryset(request, [obj])

    def delete_queryset(self, request, queryset):
        for policy in queryset:
            # Removed by someone else meanwhile: what was asked is done.
            with contextlib.suppress(errors.IllegalTransition):
                actions.remove_policy(policy, by=request.user)


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Exemption)
class ExemptionAdmin(ReadOnly):
    list_display = ["team", "kind", "namespace", "name", "until", "reason", "created_by"]
    list_filter = ["team"]


@admin.register(IdleState)
class IdleStateAdmin(ReadOnly):
    list_display = ["team", "kind", "namespace", "name", "idle_since", "action_due_at", "acted_at"]


@admin.register(IdleAction)
class IdleActionAdmin(ReadOnly):
    list_display = ["at", "team", "kind", "mode", "workload_kind", "namespace", "workload_name"]
    list_filter = ["kind", "mode", "team"]
