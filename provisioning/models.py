from django.db import models

from cluster.outbox import OutboxRow
from teams.models import SyncStatus, Team, register_audit_actions


class ProvisioningAction(models.TextChoices):
    """What the cluster sync did to a team's namespace (provisioning.actions)."""

    SYNC_FAILED = "sync_failed", "Sync failed"
    DRIFT_REPAIRED = "drift_repaired", "Drift repaired"
    DELETE_NAMESPACE = "delete_namespace", "Namespace deleted"


register_audit_actions(ProvisioningAction)


class TeamSync(OutboxRow):
    """How far the cluster is from what the database wants for one team.

    A row of the outbox (cluster.outbox): `generation` goes up with every change
    of the team's desired state (in the same database as the change, so a crash
    or a Redis outage loses nothing); `synced_generation` is the last one the
    cluster was made to match. A sync is claimed with a conditional UPDATE of
    `claimed_until`, a lease that runs out by itself when the worker holding it
    dies.
    """

    # A row exists once the team was marked: never "not provisioned".
    Status = SyncStatus
    STATUSES = [
        (value, label) for value, label in SyncStatus.choices if value != SyncStatus.NOT_PROVISIONED
    ]

    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="sync"
    )
    status = models.CharField(max_length=16, choices=STATUSES, default=Status.PENDING)
    # Hash of each object as we last applied it, by "Kind/name": a live object
    # that differs from a hash we still want was changed by someone else (drift).
    applied = models.JSONField(default=dict, blank=True)
    # check_drift found live objects that differ: the next sync reads them all
    # (a sync otherwise applies only what changed, unread).
    drifted = models.BooleanField(default=False)
    # Digest of the desired state last synced: the sweep compares it with the
    # desired state now, which catches changes nobody marked (membership).
    synced_digest = models.CharField(max_length=32, blank=True)
    last_error = models.TextField(blank=True)
    last_error_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    namespace_deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]

    def __str__(self):
        return f"{self.team} {self.status} (generation {self.synced_generation}/{self.generation})"

    @property
    def flavor_rules(self):
        """How the team's GPU flavors are enforced on the cluster, from what the sync
        applied: "pinned" (the validating and the mutating admission policy),
        "enforced" (the validating one), "" (neither: the server serves no admission
        policies, or the team was never synced)."""
        kinds = {key.partition("/")[0] for key in self.applied}
        if "ValidatingAdmissionPolicyBinding" not in kinds:
            return ""
        return "pinned" if "MutatingAdmissionPolicyBinding" in kinds else "enforced"

    @property
    def is_failing(self):
        return self.status == self.Status.FAILING
