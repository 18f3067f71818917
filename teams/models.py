"""Teams and their members: the portal's bottom models, which every feature's
rows point at.

They were gpu_requests' first models and keep its tables (`db_table`), so the
move here changed no row (teams/migrations/0001_initial.py).
"""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

from teams.namespaces import namespace_of

# A team slug becomes a Kubernetes namespace name: an RFC 1123 label.
dns1123_label = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "Use 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit "
    "(it becomes a Kubernetes namespace name).",
)


class SyncStatus(models.TextChoices):
    """How far a team's namespace on the cluster is from what the portal wants.

    The one vocabulary for it: the cluster layer keeps the record (a row per
    team, reached here as `team.sync`); a team without one was never synced.
    """

    NOT_PROVISIONED = "not_provisioned", "Not provisioned yet"
    IN_SYNC = "in_sync", "In sync"
    PENDING = "pending", "Pending"
    FAILING = "failing", "Failing"


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.CharField(max_length=63, unique=True, validators=[dns1123_label])
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Archived teams ask for and get no quota; set by `teams.actions.archive_team`.
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "gpu_requests_team"
        ordering = ["name"]
        # What makes a platform admin (teams.access.can_review): reviews GPU requests,
        # sees and manages every team.
        permissions = [("review_requests", "Can review GPU requests")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("team_page", args=[self.slug])

    @property
    def is_archived(self):
        return self.archived_at is not None

    @property
    def namespace(self):
        return namespace_of(self.slug)

    @property
    def sync_record(self):
        """The team's sync row kept by the layer above, or None (a query unless
        `sync` was selected with the team)."""
        return getattr(self, "sync", None)

    @property
    def sync_status(self):
        record = self.sync_record
        return SyncStatus.NOT_PROVISIONED if record is None else SyncStatus(record.status)


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        MANAGER = "manager", "Manager"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        db_table = "gpu_requests_membership"
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership")]

    def __str__(self):
        return f"{self.user} in {self.team} ({self.role})"
