from rest_framework.routers import DefaultRouter

from gpu_requests import api

router = DefaultRouter()
router.register("teams", api.TeamViewSet, basename="team")
router.register("flavors", api.FlavorViewSet, basename="flavor")
router.register("quota-requests", api.QuotaRequestViewSet, basename="quotarequest")

urlpatterns = router.urls
