from django.urls import path

from idle import api

urlpatterns = [
    path("idle-policies/", api.IdlePoliciesView.as_view(), name="idle-policies"),
    path("idle-policies/<int:pk>/", api.IdlePolicyView.as_view(), name="idle-policy"),
    path("idle-actions/", api.IdleActionsView.as_view(), name="idle-actions"),
]
