"""What every app's pages ask alike: the reason given for a change."""

from django import forms

from teams.inputs import MAX_TEXT_LENGTH, validate_visible


class ReasonForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=MAX_TEXT_LENGTH,
        validators=[validate_visible],
        error_messages={"max_length": f"Keep the reason to {MAX_TEXT_LENGTH:,} characters."},
    )
