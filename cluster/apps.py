from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """The cluster layer: the GPU catalog (flavors), the Kubernetes client, the GPU
    inventory and the outbox.

    Above `teams`, below every feature (quota requests, provisioning, batch,
    billing). See docs/architecture.md.
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "cluster"
    verbose_name = "Cluster inventory"
