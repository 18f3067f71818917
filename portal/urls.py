from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from billing.api import FocusExportView
from billing.api_urls import fleet_urlpatterns
from portal import health, metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/", include("accounts.urls")),
    path("api/v1/billing/", include("billing.api_urls")),
    path("api/v1/exports/focus", FocusExportView.as_view(), name="focus-export"),
    path("api/v1/", include(fleet_urlpatterns)),
    path("api/v1/", include("cluster.api_urls")),
    path("api/v1/", include("gpu_requests.api_urls")),
    path("api/v1/", include("batch.api_urls")),
    path("api/v1/", include("idle.api_urls")),
    path("batch/", include("batch.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its setup script as a file: no inline script for the CSP.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("cluster/", include("provisioning.urls")),
    path("billing/", include("billing.urls")),
    path("idle/", include("idle.urls")),
    path("", include("notifications.urls")),
    path("", include("gpu_requests.urls")),
]

handler400 = "portal.edge.bad_request"
handler403 = "portal.edge.permission_denied"
handler404 = "portal.edge.page_not_found"
handler500 = "portal.edge.server_error"
