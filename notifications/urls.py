from django.urls import path

from notifications import views

urlpatterns = [
    path("teams/<slug:slug>/webhook/", views.webhook_page, name="team_webhook"),
    path("teams/<slug:slug>/webhook/test/", views.webhook_test, name="team_webhook_test"),
    path("teams/<slug:slug>/webhook/secret/", views.webhook_secret, name="team_webhook_secret"),
    path("teams/<slug:slug>/webhook/remove/", views.webhook_remove, name="team_webhook_remove"),
    path("webhooks/deliveries/<int:pk>/resend/", views.delivery_resend, name="delivery_resend"),
    path("webhooks/", views.webhook_page, name="admin_webhooks"),
    path("webhooks/test/", views.webhook_test, name="admin_webhook_test"),
    path("webhooks/secret/", views.webhook_secret, name="admin_webhook_secret"),
    path("webhooks/remove/", views.webhook_remove, name="admin_webhook_remove"),
]
