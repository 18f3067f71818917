from django.urls import path

from gpu_requests import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("requests/new/", views.request_new, name="request_new"),
    path("requests/<int:pk>/", views.request_detail, name="request_detail"),
    path("review/", views.review_queue, name="review_queue"),
]
