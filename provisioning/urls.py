from django.urls import path

from provisioning import views

urlpatterns = [
    path("", views.cluster_overview, name="cluster_overview"),
    path("teams/<slug:slug>/archive/", views.team_archive, name="team_archive"),
    path(
        "teams/<slug:slug>/delete-namespace/",
        views.team_delete_namespace,
        name="team_delete_namespace",
    ),
]
