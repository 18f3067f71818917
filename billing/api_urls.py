from django.urls import path

from billing import api

urlpatterns = [
    path("usage/", api.UsageView.as_view(), name="billing-usage"),
    path("rates/", api.RatesView.as_view(), name="billing-rates"),
    path("budgets/", api.BudgetsView.as_view(), name="billing-budgets"),
]

# Under /api/v1/ itself: the fleet's cost is the platform's, not a team's billing.
fleet_urlpatterns = [
    path("fleet-cost/", api.FleetCostView.as_view(), name="fleet-cost"),
]
