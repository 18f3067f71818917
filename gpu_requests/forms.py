from datetime import datetime

from django import forms
from django.conf import settings
from django.utils import timezone

from gpu_requests import actions
from gpu_requests.models import MAX_TEXT_LENGTH, Flavor, QuotaRequest, estimate_cost

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


class FlavorChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, flavor):
        return (
            f"{flavor.name} · {flavor.price_per_gpu_hour.normalize():f} "
            f"{settings.PORTAL_CURRENCY}/GPU-hour · {actions.capacity_of(flavor)} in the cluster"
        )


class QuotaRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None)
    flavor = FlavorChoiceField(queryset=Flavor.objects.filter(is_active=True))
    gpus = forms.IntegerField(label="GPUs", widget=forms.NumberInput(attrs={"min": 1}))
    starts_at = LocalDateTimeField(label="Starts")
    ends_at = LocalDateTimeField(
        label="Ends", required=False, help_text="Leave empty for open-ended quota."
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=MAX_TEXT_LENGTH,
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

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        zone = timezone.get_current_timezone_name()
        self.fields["starts_at"].label = f"Starts ({zone})"
        self.fields["ends_at"].label = f"Ends ({zone})"
        counted(self.fields["justification"], "count-justification")
        teams = actions.teams_for(user)
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


def counted(field, counter_id):
    """Count the field's text on the page instead of letting the browser cut it:
    `maxlength` silently drops what is typed or pasted past the limit."""
    field.widget.attrs.pop("maxlength", None)
    field.widget.attrs |= {"data-limit": MAX_TEXT_LENGTH, "data-counter": counter_id}


class ReasonForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=MAX_TEXT_LENGTH,
        error_messages={"max_length": f"Keep the reason to {MAX_TEXT_LENGTH:,} characters."},
    )
