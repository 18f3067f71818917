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
    when_spent = forms.ChoiceField(
        label="Once a hard budget is spent",
        choices=Budget.WhenSpent.choices,
        initial=Budget.WhenSpent.STOP_RUNNING,
        required=False,
        help_text="New GPU work is held either way, in the team's namespace too.",
    )
