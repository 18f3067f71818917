from django.urls import path

from idle import views

urlpatterns = [
    path("states/<int:pk>/bring-back/", views.bring_back, name="idle_bring_back"),
    path("states/<int:pk>/exempt/", views.exempt, name="idle_exempt"),
]
