from django.apps import AppConfig


class GpuRequestsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "gpu_requests"
    verbose_name = "GPU quota"

    def ready(self):
        from gpu_requests import timezones  # noqa: F401  (connects the login receiver)
