from datetime import datetime

from django import forms
from django.utils import timezone

from cluster.capacity import capacity_of
from cluster.forms import FlavorChoiceField
from cluster.models import Flavor
from gpu_requests import actions, capacity, matching
from gpu_requests.models import QuotaRequest, estimate_cost
from teams import access, inputs
from teams.inputs import MAX_TEXT_LENGTH, validate_visible

# What <input type="datetime-local"> sends (seconds only when the user typed them).
DATETIME_LOCAL_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"]


class LocalDateTimeField(forms.DateTimeField):
    """A datetime-local input read and shown in the viewer's time zone (the one the
    middleware activated: the user's, UTC until it is known); stored as UTC."""

    widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
    input_formats = DATETIME_LOCAL_FORMATS

    def prepare_value(self, value):
        if isinstance(value, datetime) and timezone.is_aware(value):
            return timezone.localtime(value).replace(tzinfo=None)
        return value


class QuotaRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None)
    flavor = FlavorChoiceField(
        queryset=Flavor.objects.filter(is_active=True),
        error_messages={
            "invalid_choice": "Select a valid choice: one of the flavors offered "
            "(with the properties asked for, if any)."
        },
    )
    gpus = forms.IntegerField(label="GPUs", widget=forms.NumberInput(attrs={"min": 1}))
    starts_at = LocalDateTimeField(label="Starts")
    ends_at = LocalDateTimeField(
        label="Ends", required=False, help_text="Leave empty for open-ended quota."
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=MAX_TEXT_LENGTH,
        validators=[validate_visible],
        help_text="What will run, and why it needs these GPUs.",
    )

    # Set when the request asks for more time or GPUs on approved or active quota.
    follows = forms.ModelChoiceField(
        queryset=QuotaRequest.objects.none(), required=False, widget=forms.HiddenInput
    )
    follow_kind = forms.ChoiceField(
        choices=[("", ""), *QuotaRequest.FollowKind.choices],
        required=False,
        widget=forms.HiddenInput,
    )

    def __init__(self, user, *args, flavors=None, **kwargs):
        """`flavors`: the catalog's flavors to offer (default: every active one)."""
        super().__init__(*args, **kwargs)
        self.user = user
        if flavors is not None:
            self.fields["flavor"].queryset = flavors
        zone = timezone.get_current_timezone_name()
        self.fields["starts_at"].label = f"Starts ({zone})"
        self.fields["ends_at"].label = f"Ends ({zone})"
        counted(self.fields["justification"], "count-justification")
        teams = access.teams_for(user)
        self.fields["team"].queryset = teams
        self.fields["follows"].queryset = QuotaRequest.objects.filter(
            team__in=teams, status__in=QuotaRequest.RESERVING
        ).select_related("team", "flavor")
        # Only the user's teams are offered; a tampered POST naming another
        # team fails as "not one of the available choices".
        if not self.is_bound and len(teams) == 1:
            self.fields["team"].initial = teams[0].pk
            self.fields["team"].empty_label = None

    def clean(self):
        cleaned = super().clean()
        # The action's own rules, so the live check and the submit agree.
        errors = actions.validate_request(
            team=cleaned.get("team"),
            flavor=cleaned.get("flavor"),
            gpus=cleaned.get("gpus"),
            starts_at=cleaned.get("starts_at"),
            ends_at=cleaned.get("ends_at"),
            justification=cleaned.get("justification"),
            by=self.user,
        )
        follows = cleaned.get("follows")
        if follows is not None:
            if not cleaned.get("follow_kind"):
                cleaned["follow_kind"] = QuotaRequest.FollowKind.MORE_GPUS
            more = actions.validate_follow_up(
                follows, team=cleaned.get("team"), flavor=cleaned.get("flavor")
            )
            errors = {**errors, **{k: v for k, v in more.items() if k != "follows"}}
            if "follows" in more:
                errors.setdefault("__all__", []).extend(more["follows"])
        for field, messages in errors.items():
            for message in messages:
                self.add_error(None if field == "__all__" else field, message)
        return cleaned

    def followed_pk(self):
        """The id of the request this one follows, once it is known to be one the user may
        follow (a bound form's raw value can be anything a client sent)."""
        if self.is_bound:
            follows = getattr(self, "cleaned_data", {}).get("follows")
            return follows.pk if follows is not None else None
        return (self.initial or {}).get("follows")

    @classmethod
    def follow_up_initial(cls, follows, kind, now):
        """The form pre-filled to ask for more time (from the end, as long again) or
        more GPUs (from now or the start, to the same end) on `follows`."""
        initial = {
            "team": follows.team_id,
            "flavor": follows.flavor_id,
            "follows": follows.pk,
            "follow_kind": kind,
            "justification": f"Follows #{follows.pk}: ",
        }
        if kind == QuotaRequest.FollowKind.MORE_TIME and follows.ends_at is not None:
            length = follows.ends_at - follows.starts_at
            initial.update(
                gpus=follows.gpus, starts_at=follows.ends_at, ends_at=follows.ends_at + length
            )
        else:
            initial.update(gpus=1, starts_at=max(follows.starts_at, now), ends_at=follows.ends_at)
        return initial

    def estimate(self):
        """Cost of what has been typed so far (unbound: of what it is pre-filled with),
        or None while it is incomplete."""
        if not self.is_bound:
            data = dict(self.initial)
            if data.get("flavor"):
                data["flavor"] = self.fields["flavor"].queryset.filter(pk=data["flavor"]).first()
            return self._estimate(data)
        if "ends_at" in self.errors:
            return None
        return self._estimate(getattr(self, "cleaned_data", {}))

    @staticmethod
    def _estimate(data):
        flavor, gpus, starts_at = data.get("flavor"), data.get("gpus"), data.get("starts_at")
        if not (flavor and gpus and starts_at):
            return None
        ends_at = data.get("ends_at")
        hourly = gpus * flavor.price_per_gpu_hour
        return {
            "flavor": flavor,
            "gpus": gpus,
            "hours": None if ends_at is None else (ends_at - starts_at).total_seconds() / 3600,
            "total": estimate_cost(gpus, starts_at, ends_at, flavor.price_per_gpu_hour),
            "hourly": hourly,
            "daily": hourly * 24,
        }


# Past the memory of any GPU, far within an int.
MAX_MEMORY_GB = 100_000


class FlavorPropertiesForm(forms.Form):
    """What a team asks of a GPU ("at least 40 GB, any model"): narrows the request
    form's flavors to those whose every device has it (`gpu_requests.matching`)."""

    min_memory_gb = forms.CharField(
        label="Memory at least (GB)",
        required=False,
        widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": "any"}),
    )
    model = forms.CharField(
        label="Model or architecture",
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"placeholder": "any, e.g. H100 or Hopper"}),
    )
    sharing = forms.ChoiceField(
        label="Whole GPU or MIG slice",
        required=False,
        choices=[("", "Either"), *Flavor.Sharing.choices],
    )

    def clean_min_memory_gb(self):
        raw = self.cleaned_data["min_memory_gb"].strip()
        if not raw:
            return None
        value = inputs.whole_number(raw, maximum=MAX_MEMORY_GB)
        if value is None:
            raise forms.ValidationError(
                f"Type a whole number of GB from 0 to {MAX_MEMORY_GB:,}, in digits 0-9 (e.g. 40)."
            )
        return value

    def clean_model(self):
        model = self.cleaned_data["model"].strip()
        if inputs.has_control_characters(model):
            raise forms.ValidationError("Type a model or architecture, e.g. H100 or Hopper.")
        return model

    def asked(self):
        """The properties asked for (cleaned), {} when none or any is not readable."""
        if not self.is_bound or not self.is_valid():
            return {}
        return {name: value for name, value in self.cleaned_data.items() if value}

    def key(self):
        """The properties as one string: the page keeps the one its flavor list was made for."""
        asked = self.asked()
        return "|".join(str(asked.get(name, "")) for name in self.fields)

    def flavors(self):
        """The active flavors with the properties asked for, as a queryset. A query;
        the selectors are read in Python (the catalog is short)."""
        active = Flavor.objects.filter(is_active=True)
        asked = self.asked()
        if not asked:
            return active
        return active.filter(pk__in=[f.pk for f in matching.matching(active, **asked)])


def flavor_offers(flavors, *, gpus=None, starts_at=None, ends_at=None, now=None):
    """[{flavor, offer, price, total, hourly, free, capacity}] for the matching table: what
    each flavor would cost for this request and what is free over its period (from now,
    open-ended, until a start is typed), by cluster. One query per reservation source
    (`flavors` with their clusters: `select_related("cluster")`)."""
    flavors = sorted(flavors, key=lambda f: (f.cluster.name, f.name))  # grouped by cluster
    starts_at = starts_at or now or timezone.now()
    if ends_at is not None and ends_at <= starts_at:
        ends_at = None
    free = capacity.free_over(flavors, starts_at, ends_at)
    rows = []
    for flavor in flavors:
        row = {"flavor": flavor, "offer": matching.offer_of(flavor), "free": free[flavor.pk]}
        row["capacity"] = capacity_of(flavor)
        # Priced only for a number of GPUs the flavor could ever give.
        row["priced"] = bool(gpus) and gpus <= row["capacity"]
        if row["priced"]:
            row["hourly"] = gpus * flavor.price_per_gpu_hour
            row["total"] = estimate_cost(gpus, starts_at, ends_at, flavor.price_per_gpu_hour)
        rows.append(row)
    return rows


def counted(field, counter_id):
    """Count the field's text on the page instead of letting the browser cut it:
    `maxlength` silently drops what is typed or pasted past the limit."""
    field.widget.attrs.pop("maxlength", None)
    field.widget.attrs |= {"data-limit": MAX_TEXT_LENGTH, "data-counter": counter_id}
