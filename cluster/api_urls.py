from rest_framework.routers import DefaultRouter

from cluster import api

router = DefaultRouter()
router.register("clusters", api.ClusterViewSet, basename="cluster")

urlpatterns = router.urls
