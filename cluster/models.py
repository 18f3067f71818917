from django.db import models
from django.utils import timezone

from gpu_requests.models import Flavor
from teams.models import Team


class FlavorCapacity(models.Model):
    """What the cluster holds of one flavor, as the inventory task last saw it.

    `override` is the admin's word and wins over the inventory (for capacity the
    cluster does not show yet, or a pool being drained on purpose).
    """

    flavor = models.OneToOneField(
        Flavor, on_delete=models.CASCADE, primary_key=True, related_name="inventory"
    )
    devices = models.PositiveIntegerField(null=True, blank=True)
    allocated = models.PositiveIntegerField(null=True, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    override = models.PositiveIntegerField(
        null=True, blank=True, help_text="Capacity to use instead of the inventory."
    )
    # node -> devices of the flavor there (pages show which nodes' devices match).
    nodes = models.JSONField(default=dict, blank=True)
    # Why the inventory could not count the flavor (a DRA flavor on a cluster
    # without DRA, a missing DeviceClass); "" when it could.
    problem = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "flavor capacities"

    def __str__(self):
        return f"{self.flavor}: {self.devices} devices"

    @property
    def free(self):
        if self.devices is None:
            return None
        return max(self.devices - (self.allocated or 0), 0)

    @property
    def age(self):
        return None if self.observed_at is None else timezone.now() - self.observed_at


class GpuNode(models.Model):
    """A GPU node as the inventory task last saw it (replaced on every run)."""

    name = models.CharField(max_length=253, unique=True)
    pool = models.CharField(max_length=253, blank=True)
    gpu_model = models.CharField(max_length=253, blank=True)
    allocatable = models.JSONField(default=dict)  # resource name -> devices
    allocated = models.JSONField(default=dict)  # resource name -> devices held by pods
    taints = models.JSONField(default=list)
    cordoned = models.BooleanField(default=False)
    ready = models.BooleanField(default=True)
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["pool", "name"]

    def __str__(self):
        return self.name

    def resources(self):
        """[(resource, allocatable, allocated, free)] for the nodes table."""
        rows = []
        for resource, total in sorted(self.allocatable.items()):
            used = self.allocated.get(resource, 0)
            rows.append((resource, total, used, max(total - used, 0)))
        return rows

    @property
    def taint_labels(self):
        return [
            f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
            for t in self.taints
        ]


class NamespaceQuota(models.Model):
    """One GPU resource of a team namespace's ResourceQuota, as the inventory task
    last read it: the cap (`spec.hard`), what the team's pods use of it
    (`status.used`), and the last pod creation it refused (a FailedCreate event).

    Replaced on every run; pages read it through `team.quota_usage` (the reverse
    accessor), so gpu_requests shows it without importing this app.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_usage")
    resource_name = models.CharField(max_length=253)
    hard = models.PositiveIntegerField()
    used = models.PositiveIntegerField()
    refused_at = models.DateTimeField(null=True, blank=True)
    refused_message = models.TextField(blank=True)
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["resource_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "resource_name"], name="one_quota_row_per_resource"
            )
        ]

    def __str__(self):
        return f"{self.team_id} {self.resource_name}: {self.used}/{self.hard}"

    @property
    def at_limit(self):
        return self.used >= self.hard

    @property
    def refusing(self):
        """At the limit, and the cluster has refused pods for it."""
        return self.at_limit and self.refused_at is not None


class DraAllocation(models.Model):
    """One device a ResourceClaim's allocation gave a pod, as the inventory saw it
    (`status.allocation.devices.results`, the pod from `status.reservedFor`).

    Kept after the claim is gone (updated, never replaced): billing reads which
    pod held which device in past hours from it, instead of trusting the DCGM
    exporter's pod labels. `first_seen`/`last_seen` bound what the inventory saw.
    """

    claim_uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63)
    claim = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    node = models.CharField(max_length=253, blank=True)
    driver = models.CharField(max_length=253)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=253)
    flavor = models.ForeignKey(Flavor, on_delete=models.SET_NULL, null=True, related_name="+")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["claim_uid", "pod_uid", "driver", "pool", "device"],
                name="one_row_per_claimed_device",
            )
        ]
        indexes = [models.Index(fields=["last_seen"])]

    def __str__(self):
        return f"{self.namespace}/{self.pod}: {self.driver}/{self.pool}/{self.device}"
