from django.urls import path

from gpu_requests import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("requests/new/", views.request_new, name="request_new"),
    path("requests/<int:pk>/", views.request_detail, name="request_detail"),
    path("requests/<int:pk>/cancel/", views.request_cancel, name="request_cancel"),
    path("requests/<int:pk>/approve/", views.request_approve, name="request_approve"),
    path("requests/<int:pk>/reject/", views.request_reject, name="request_reject"),
    path("requests/<int:pk>/revoke/", views.request_revoke, name="request_revoke"),
    path("review/", views.review_queue, name="review_queue"),
]
