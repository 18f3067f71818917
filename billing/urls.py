from django.urls import path

from billing import views

urlpatterns = [
    path("", views.overview, name="billing"),
    path("admin/", views.admin_page, name="billing_admin"),
    path("health/", views.health_page, name="billing_health"),
    path("teams/<slug:slug>/", views.team_page, name="billing_team"),
    path("teams/<slug:slug>/budget/", views.team_budget, name="billing_team_budget"),
    path(
        "teams/<slug:slug>/workloads/<str:namespace>/<str:kind>/<str:name>/",
        views.workload_page,
        name="billing_workload",
    ),
]
