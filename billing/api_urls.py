from django.urls import path

from billing import api

urlpatterns = [
    path("usage/", api.UsageView.as_view(), name="billing-usage"),
    path("rates/", api.RatesView.as_view(), name="billing-rates"),
    path("budgets/", api.BudgetsView.as_view(), name="billing-budgets"),
]
