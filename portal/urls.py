from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/billing/", include("billing.api_urls")),
    path("api/v1/", include("gpu_requests.api_urls")),
    path("api/v1/", include("batch.api_urls")),
    path("batch/", include("batch.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("cluster/", include("provisioning.urls")),
    path("billing/", include("billing.urls")),
    path("", include("gpu_requests.urls")),
]
