from django.db import models
from django.utils import timezone

from gpu_requests.models import Flavor, Team


class TeamSync(models.Model):
    """How far the cluster is from what the database wants for one team.

    `generation` goes up with every change of the team's desired state (in the
    same database as the change, so a crash or a Redis outage loses nothing);
    `synced_generation` is the last one the cluster was made to match. A sync is
    claimed with a conditional UPDATE of `claimed_until`, a lease that runs out
    by itself when the worker holding it dies.
    """

    class Status(models.TextChoices):
        IN_SYNC = "in_sync", "In sync"
        PENDING = "pending", "Pending"
        FAILING = "failing", "Failing"

    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="sync"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    generation = models.PositiveBigIntegerField(default=1)
    synced_generation = models.PositiveBigIntegerField(default=0)
    # The generation a permanent error stopped: not retried until it changes.
    refused_generation = models.PositiveBigIntegerField(default=0)
    # Hash of each object as we last applied it, by "Kind/name": a live object
    # that differs from a hash we still want was changed by someone else (drift).
    applied = models.JSONField(default=dict, blank=True)
    # Digest of the desired state last synced: the sweep compares it with the
    # desired state now, which catches changes nobody marked (membership).
    synced_digest = models.CharField(max_length=32, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True, db_index=True)
    claim_token = models.CharField(max_length=32, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    namespace_deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]

    def __str__(self):
        return f"{self.team} {self.status} (generation {self.synced_generation}/{self.generation})"

    @property
    def is_failing(self):
        return self.status == self.Status.FAILING

    def as_dict(self):
        """What the API shows: `sync_status(team)` below for a team without a row."""
        return {
            "status": self.status,
            "last_error": self.last_error or None,
            "last_error_status": self.last_error_status,
            "last_error_at": self.last_error_at,
            "last_synced_at": self.last_synced_at,
            "archived": self.archived_at is not None,
            "namespace_deleted": self.namespace_deleted_at is not None,
        }


def sync_status(team):
    """The team's sync status for the API (no query if `sync` was selected)."""
    try:
        return team.sync.as_dict()
    except TeamSync.DoesNotExist:
        return {
            "status": "not_provisioned",
            "last_error": None,
            "last_error_status": None,
            "last_error_at": None,
            "last_synced_at": None,
            "archived": False,
            "namespace_deleted": False,
        }


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
