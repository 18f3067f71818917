"""The Django admin's team pages, and the admin helpers every app's pages use:
autocompletes that survive a typed-in id, and read-only pages for objects that
change only through the actions."""

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteSelect

from teams import hooks, inputs
from teams.models import Membership, Team


class WholeNumberAutocomplete(AutocompleteSelect):
    """Django's autocomplete widget looks the selected value up as an id when it
    renders, also a value a client posted or put in the add page's query string:
    "x" raised ValueError there (a 500). Values that are no id select nothing; the
    form's own validation says what is wrong."""

    def optgroups(self, name, value, attrs=None):
        ids = [v for v in value if v in ("", None) or inputs.whole_number(str(v)) is not None]
        return super().optgroups(name, ids, attrs)


class SafeAutocompleteMixin:
    """`autocomplete_fields` with WholeNumberAutocomplete (for ModelAdmins and inlines)."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = WholeNumberAutocomplete(
                db_field, self.admin_site, using=kwargs.get("using")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdminMixin:
    """Objects that change only through the actions: their page shows no Save buttons."""

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
        }
        return super().change_view(request, object_id, form_url, extra_context)


class MembershipForm(forms.ModelForm):
    class Meta:
        model = Membership
        fields = ["user", "role"]

    def clean(self):
        # The inline leaves the team out of Django's unique checks, so a form posted
        # as new for someone already in the team (a management form that counts its
        # initial forms wrong) reached the database's constraint: a 500.
        cleaned = super().clean()
        user, team = cleaned.get("user"), self.instance.team_id
        taken = Membership.objects.filter(team_id=team, user=user).exclude(pk=self.instance.pk)
        if user is not None and team is not None and taken.exists():
            self.add_error("user", f"{user.username} is already in this team.")
        return cleaned


class MembershipInline(SafeAutocompleteMixin, admin.TabularInline):
    model = Membership
    form = MembershipForm
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "cluster_sync", "created_at"]
    list_select_related = ["sync"]  # the sync column costs no query per row
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]

    @admin.display(description="Cluster")
    def cluster_sync(self, team):
        record = team.sync_record
        label = team.sync_status.label
        if record is not None and record.is_failing and record.last_error:
            label = f"{label}: {record.last_error}"
        if record is not None and record.namespace_deleted_at:
            return f"{label} (archived, namespace deleted)"
        return f"{label} (archived)" if team.is_archived else label

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        memberships_changed = any(
            formset.new_objects or formset.changed_objects or formset.deleted_objects
            for formset in formsets
            if formset.model is Membership
        )
        if memberships_changed:
            hooks.members_changed(form.instance.pk)
