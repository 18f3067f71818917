from django.urls import path

from accounts import views

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke, name="token_revoke"),
]
