from django.urls import path

from idle import views

urlpatterns = [
    path("policies/", views.policies, name="idle_policies"),
    path("policies/<int:pk>/remove/", views.remove_policy, name="idle_policy_remove"),
    path("states/<int:pk>/bring-back/", views.bring_back, name="idle_bring_back"),
    path("states/<int:pk>/exempt/", views.exempt, name="idle_exempt"),
]
