from django import forms

from accounts.actions import EXPIRY_DAYS


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. 'CI pipeline'.")
    days = forms.TypedChoiceField(
        label="Expires in",
        coerce=int,
        choices=[(days, f"{days} days") for days in EXPIRY_DAYS],
        initial=90,
    )
