from django.urls import path

from idle import api

urlpatterns = [
    path("idle-policies/", api.IdlePoliciesView.as_view(), name="idle-policies"),
    path("idle-policies/<int:pk>/", api.IdlePolicyView.as_view(), name="idle-policy"),
    path("idle-exemptions/", api.ExemptionsView.as_view(), name="idle-exemptions"),
    path("idle-states/", api.IdleStatesView.as_view(), name="idle-states"),
    path("idle-states/<int:pk>/bring-back/", api.BringBackView.as_view(), name="idle-bring-back"),
    path("idle-savings/", api.IdleSavingsView.as_view(), name="idle-savings"),
    path("idle-actions/", api.IdleActionsView.as_view(), name="idle-actions"),
]
