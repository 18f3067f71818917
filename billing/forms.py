from django import forms

from billing.models import BUDGET_VALIDATORS, Budget


class BudgetForm(forms.Form):
    monthly_amount = forms.DecimalField(
        label="Monthly budget",
        required=False,
        max_digits=14,
        decimal_places=2,
        validators=BUDGET_VALIDATORS,
        help_text="Leave empty for no budget.",
    )
    mode = forms.ChoiceField(
        label="Mode", choices=Budget.Mode.choices, initial=Budget.Mode.SOFT, required=False
    )
