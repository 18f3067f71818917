"""What every app's pages ask alike: the reason given for a change."""

from django import forms

from teams.inputs import MAX_TEXT_LENGTH


class ReasonForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=MAX_TEXT_LENGTH,
        error_messages={"max_length": f"Keep the reason to {MAX_TEXT_LENGTH:,} characters."},
    )
