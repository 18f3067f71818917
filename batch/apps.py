from django.apps import AppConfig


class BatchConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "batch"
    verbose_name = "Batch windows"

    def ready(self):
        from batch import cluster
        from gpu_requests import hooks

        hooks.on_extra_quota(cluster.running_allotment)
