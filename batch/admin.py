"""Admin pages for windows, the image allowlist and team weights.

Windows are saved through `actions.save_window`, so the admin gets the same
checks (rule, capacity against quota) as the API.
"""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from batch import actions, occurrences, validation
from batch.models import BatchJob, BatchJobEvent, BatchWindow, ImageRule, TeamShare
from cluster.models import Flavor
from teams import inputs


class WindowForm(forms.ModelForm):
    days_text = forms.CharField(label="Days", help_text="e.g. fri, sat")
    exceptions_text = forms.CharField(
        label="Exceptions", required=False, help_text="Local dates, comma-separated: 2026-12-24"
    )
    capacity_text = forms.CharField(
        label="Batch capacity", help_text="GPUs per flavor slug: h100=8, a100=4"
    )

    class Meta:
        model = BatchWindow
        fields = [
            "name",
            "timezone",
            "start_time",
            "end_time",
            "end_day",
            "price_factor",
            "spot_allowed",
            "enabled",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        window = self.instance
        if window.pk:
            self.initial["days_text"] = ", ".join(window.days)
            self.initial["exceptions_text"] = ", ".join(window.exceptions)
            self.initial["capacity_text"] = ", ".join(
                f"{c.flavor.slug}={c.gpus}" for c in window.capacities.select_related("flavor")
            )

    @staticmethod
    def _items(text):
        return [item.strip() for item in (text or "").split(",") if item.strip()]

    def clean(self):
        cleaned = super().clean()
        capacity = {}
        for item in self._items(cleaned.get("capacity_text")):
            slug, _, gpus = item.partition("=")
            gpus = inputs.whole_number(gpus, maximum=validation.MAX_GPUS)
            if gpus is None:
                self.add_error("capacity_text", f"{item!r}: write slug=GPUs, e.g. h100=8.")
                return cleaned
            capacity[slug.strip()] = gpus
        flavors = {f.slug: f for f in Flavor.objects.filter(slug__in=list(capacity))}
        if unknown := sorted(set(capacity) - set(flavors)):
            self.add_error("capacity_text", f"Unknown flavor(s): {', '.join(unknown)}.")
            return cleaned
        cleaned["days"] = [d.lower() for d in self._items(cleaned.get("days_text"))]
        cleaned["exceptions"] = self._items(cleaned.get("exceptions_text"))
        cleaned["capacity"] = {flavors[s]: g for s, g in capacity.items()}
        errors = validation.window_errors(
            name=cleaned.get("name"),
            timezone=cleaned.get("timezone"),
            days=cleaned["days"],
            start_time=cleaned.get("start_time"),
            end_time=cleaned.get("end_time"),
            end_day=cleaned.get("end_day"),
            exceptions=cleaned["exceptions"],
            capacity=capacity,
        )
        names = {"days": "days_text", "exceptions": "exceptions_text", "capacity": "capacity_text"}
        for field, messages in errors.items():
            self.add_error(names.get(field, field), messages)
        # A field Django refused (a start time that is no time) is not in `cleaned`.
        if not errors and not self.errors:
            rule = occurrences.WeeklyRule(
                timezone=cleaned["timezone"],
                days=tuple(cleaned["days"]),
                start=cleaned["start_time"],
                end=cleaned["end_time"],
                end_day=cleaned.get("end_day") or None,
                exceptions=frozenset(cleaned["exceptions"]),
            )
            try:
                actions.check_capacity(
                    cleaned["name"],
                    rule,
                    cleaned["capacity"],
                    spot_allowed=bool(cleaned.get("spot_allowed")),
                    enabled=bool(cleaned.get("enabled")),
                    exclude_window=self.instance if self.instance.pk else None,
                )
            except ValidationError as exc:
                self.add_error("capacity_text", exc.message_dict["capacity"])
        return cleaned


@admin.register(BatchWindow)
class BatchWindowAdmin(admin.ModelAdmin):
    form = WindowForm
    list_display = ["name", "summary", "price_factor", "spot_allowed", "enabled"]

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        fields = {name: data[name] for name in WindowForm.Meta.fields}
        fields["days"], fields["exceptions"] = data["days"], data["exceptions"]
        saved = actions.save_window(
            obj if change else None, by=request.user, capacity=data["capacity"], **fields
        )
        obj.pk = saved.pk

    def save_related(self, request, form, formsets, change):
        pass  # capacities are written by the action


@admin.register(ImageRule)
class ImageRuleAdmin(admin.ModelAdmin):
    list_display = ["prefix", "note"]
    search_fields = ["prefix"]


@admin.register(TeamShare)
class TeamShareAdmin(admin.ModelAdmin):
    list_display = ["team", "weight"]


class EventInline(admin.TabularInline):
    model = BatchJobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["created_at", "actor", "action", "from_status", "to_status", "reason"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(BatchJob)
class BatchJobAdmin(admin.ModelAdmin):
    list_display = ["pk", "name", "team", "flavor", "status", "planned_start"]
    list_filter = ["status", "flavor"]
    inlines = [EventInline]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in BatchJob._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
