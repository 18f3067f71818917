"""The idle policy form of the portal's pages: admins set any policy, a team's
managers their team's (never looser than the flavor's: `actions.set_policy`)."""

from django import forms

from cluster.models import Flavor
from idle.models import MAX_MINUTES, Mode
from teams import access
from teams.models import Membership, Team

EVERY_TEAM = ""


class PolicyForm(forms.Form):
    flavor = forms.ModelChoiceField(Flavor.objects.filter(is_active=True), to_field_name="slug")
    # Not required: "" is the flavor's policy, an admin's choice (a manager who
    # sends it is refused by actions.set_policy, as a form error on this field).
    team = forms.ChoiceField(
        required=False,
        label="Applies to",
        help_text="A team's policy may only be stricter than the flavor's.",
    )
    idle_minutes = forms.IntegerField(
        label="Idle minutes before the notice",
        min_value=1,
        max_value=MAX_MINUTES,
        help_text=f"1 to {MAX_MINUTES:,} (a week).",
    )
    grace_minutes = forms.IntegerField(
        label="Grace minutes from the notice to the action",
        min_value=0,
        max_value=MAX_MINUTES,
        help_text=f"0 to {MAX_MINUTES:,}.",
    )
    mode = forms.ChoiceField(choices=Mode.choices, initial=Mode.REPORT)
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, user, *args, team=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teams = {t.slug: t for t in manageable_teams(user)}
        choices = [(slug, team.name) for slug, team in self.teams.items()]
        if access.can_review(user):
            choices.insert(0, (EVERY_TEAM, "Every team (the flavor's policy)"))
        self.fields["team"].choices = choices
        if team is not None and team.slug in self.teams:
            self.fields["team"].initial = team.slug

    def clean_team(self):
        """The Team, or None for the flavor's policy."""
        slug = self.cleaned_data["team"]
        return self.teams[slug] if slug else None


def manageable_teams(user):
    """The teams whose idle policies `user` sets: every team for an admin, else
    those they manage (one query)."""
    if access.can_review(user):
        return Team.objects.order_by("name")
    return Team.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.MANAGER
    ).order_by("name")
