from django.urls import path

from batch import views

urlpatterns = [
    path("", views.calendar_view, name="batch_calendar"),
    path("jobs/", views.job_list, name="batch_jobs"),
    path("jobs/new/", views.job_new, name="batch_job_new"),
    path("jobs/<int:pk>/", views.job_detail, name="batch_job_detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="batch_job_cancel"),
    path(
        "jobs/<int:pk>/release-past-budget/",
        views.job_release_past_budget,
        name="batch_job_release_past_budget",
    ),
]
