from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """The cluster layer: the Kubernetes client, the GPU inventory and the outbox.

    Above `gpu_requests`, below every app that acts on the cluster
    (provisioning, batch, billing). See docs/architecture.md.
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "cluster"
    verbose_name = "Cluster inventory"
