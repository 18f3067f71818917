from decimal import Decimal

from django import forms


class BudgetForm(forms.Form):
    monthly_amount = forms.DecimalField(
        label="Monthly budget",
        required=False,
        max_digits=14,
        decimal_places=2,
        min_value=Decimal("0.01"),
        help_text="Leave empty for no budget.",
    )
