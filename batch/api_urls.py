from rest_framework.routers import SimpleRouter

from batch import api

router = SimpleRouter()
router.register("batch-windows", api.WindowViewSet, basename="batchwindow")
router.register("batch-jobs", api.JobViewSet, basename="batchjob")

urlpatterns = router.urls
