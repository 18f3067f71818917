"""The batch job form. Lists are typed one item per line (never a shell
string); the rules are `batch.validation`'s, the same as the API's."""

import re
from datetime import UTC, datetime

from django import forms
from django.conf import settings
from django.utils import timezone

from batch import actions
from cluster.forms import FlavorChoiceField
from cluster.models import Flavor
from teams import access

SECRET_REF = re.compile(r"^secret:([^/\s]+)/(\S+)$")


def _lines(text):
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()]


class LinesField(forms.CharField):
    """One list item per line."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false"})

    def to_python(self, value):
        return _lines(super().to_python(value) or "")

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value


class EnvField(LinesField):
    """NAME=value, or NAME=secret:SECRET/KEY for a key of a Secret in the team's namespace."""

    def to_python(self, value):
        entries = []
        for line in super().to_python(value):
            name, sep, rest = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"{line[:80]!r}: write NAME=value.")
            match = SECRET_REF.match(rest)
            if match:
                entries.append({"name": name, "secret": {"name": match[1], "key": match[2]}})
            else:
                entries.append({"name": name, "value": rest})
        return entries

    def prepare_value(self, value):
        if not isinstance(value, list):
            return value
        return "\n".join(
            f"{e['name']}=secret:{e['secret']['name']}/{e['secret']['key']}"
            if "secret" in e
            else f"{e['name']}={e.get('value', '')}"
            for e in value
        )


class WindowFlavorField(FlavorChoiceField):
    """A flavor, with when its next batch window opens (`next_open`: {flavor id: instant})."""

    next_open = {}
    now = None

    def label_from_instance(self, flavor):
        opens = self.next_open.get(flavor.pk)
        if opens is None:
            when = f"no window in the next {settings.PORTAL_BATCH_HORIZON_DAYS} days"
        elif opens <= self.now:
            when = "a window is open now"
        else:
            when = f"next window {timezone.localtime(opens):%a %d %b %H:%M %Z}"
        return f"{super().label_from_instance(flavor)} · {when}"


class BatchJobForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None)
    name = forms.CharField(max_length=100)
    flavor = WindowFlavorField(queryset=Flavor.objects.filter(is_active=True))
    image = forms.CharField(max_length=512, help_text="e.g. nvcr.io/nvidia/pytorch:24.05-py3")
    command = LinesField(required=False, help_text="One item per line; not run by a shell.")
    args = LinesField(required=False, help_text="One argument per line.")
    env = EnvField(
        required=False,
        label="Environment",
        help_text="NAME=value per line; secrets as NAME=secret:SECRET-NAME/KEY.",
    )
    gpus = forms.IntegerField(label="GPUs per pod", initial=1)
    parallelism = forms.IntegerField(initial=1, help_text="Pods at once.")
    completions = forms.IntegerField(initial=1)
    expected_runtime_minutes = forms.IntegerField(label="Expected runtime (minutes)")
    max_runtime_minutes = forms.IntegerField(
        label="Maximum runtime (minutes)", required=False, help_text="Default: the expected."
    )
    spot_allowed = forms.BooleanField(required=False, label="May run on spot nodes")
    priority = forms.IntegerField(initial=0, help_text="Within your team, -100 to 100.")
    target = forms.ChoiceField(label="When", required=False)

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        teams = access.teams_for(user)
        self.fields["team"].queryset = teams
        if not self.is_bound and len(teams) == 1:
            self.fields["team"].initial = teams[0].pk
            self.fields["team"].empty_label = None
        now = datetime.now(UTC)
        self.windows = actions.windows_with_occurrences(now, now + actions.horizon())
        choices = [("", "The next window that fits")]
        for window, found, _ in self.windows:
            choices.append((f"{window.pk}", f"Any occurrence of {window.name}"))
            choices.extend(
                (
                    f"{window.pk}@{o.opens_at.isoformat()}",
                    f"{window.name}: {timezone.localtime(o.opens_at):%a %d %b %H:%M %Z}",
                )
                for o in found
            )
        self.fields["target"].choices = choices
        self._offer_flavors_with_windows(now)

    def _offer_flavors_with_windows(self, now):
        """Only flavors some window sets aside, each saying when its next window opens."""
        next_open = {}
        for _, found, capacity in self.windows:
            for flavor_id, gpus in capacity.items():
                for occurrence in found:
                    if gpus and occurrence.closes_at > now:
                        known = next_open.get(flavor_id)
                        if known is None or occurrence.opens_at < known:
                            next_open[flavor_id] = occurrence.opens_at
                        break
                else:
                    next_open.setdefault(flavor_id, None)
        field = self.fields["flavor"]
        field.queryset = field.queryset.filter(pk__in=next_open)
        field.next_open, field.now = next_open, now
        if not next_open:
            field.empty_label = "No window sets GPUs aside for batch yet"

    def _target(self):
        value = self.cleaned_data.get("target") or ""
        pk, _, opens = value.partition("@")
        window = next((w for w, _, _ in self.windows if str(w.pk) == pk), None)
        return window, (datetime.fromisoformat(opens) if opens and window else None)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("max_runtime_minutes") is None:
            cleaned["max_runtime_minutes"] = cleaned.get("expected_runtime_minutes")
        cleaned["window"], cleaned["occurrence"] = self._target()
        data = {k: v for k, v in cleaned.items() if v is not None and k != "target"}
        if any(name not in data for name in ("gpus", "expected_runtime_minutes")):
            return cleaned
        errors, _ = actions.validate_job(
            {**data, "window": cleaned["window"], "occurrence": cleaned["occurrence"]},
            by=self.user,
        )
        for field, messages in errors.items():
            for message in messages:
                self.add_error(field if field in self.fields else "target", message)
        return cleaned

    def submitted(self):
        data = {k: v for k, v in self.cleaned_data.items() if k != "target"}
        return data

    def estimate(self):
        data = getattr(self, "cleaned_data", {})
        needed = ("flavor", "gpus", "expected_runtime_minutes")
        if any(not data.get(name) for name in needed) or self.has_error("gpus"):
            return None
        window, _ = self._target()
        found = actions.estimate_for(
            {**data, "window": window, "parallelism": data.get("parallelism") or 1}, self.windows
        )
        if found is None:
            return None
        cost, on_demand = found
        return {"cost": cost, "on_demand": on_demand, "saved": on_demand - cost}
