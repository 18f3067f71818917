"""Teams and their members: the portal's bottom models, which every feature's
rows point at; and the audit log every feature writes to.

They were gpu_requests' first models and keep its tables (`db_table`), so the
moves here changed no row (teams/migrations/0001_initial.py, and 0002 for the
audit log).
"""

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.core.validators import RegexValidator
from django.db import DEFAULT_DB_ALIAS, models
from django.db.models import F, Q
from django.urls import reverse

from teams import namespaces
from teams.inputs import validate_one_line
from teams.namespaces import namespace_of

# A team slug becomes a Kubernetes namespace name: an RFC 1123 label.
dns1123_label = RegexValidator(
    namespaces.DNS1123_LABEL.pattern,
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
    name = models.CharField(max_length=100, unique=True, validators=[validate_one_line])
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

    def clean(self):
        """A new slug (a new team's, or one changed in the admin) must name a namespace
        the portal may take as the team's (`namespaces.check_slug`: an API call).
        Every way a team is made comes here: `teams.actions.create_team` and the
        admin's form through `full_clean`."""
        super().clean()
        if self.slug and (
            self._state.adding
            or not Team.objects.filter(pk=self.pk, slug=self.slug).exists()  # a query
        ):
            namespaces.check_slug(self.slug)

    @property
    def is_archived(self):
        """An archived team asks for and gets nothing more (quota, jobs)."""
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


def audit_actions():
    """Every audit action: AuditEvent's, then those other apps add with
    `register_audit_actions`.

    A callable, so an app adding actions changes no migration of this one.
    """
    return [choice for actions in _audit_action_sets for choice in actions.choices]


def register_audit_actions(choices):
    """Add an app's own audit actions (a TextChoices whose labels read as past
    tense: "Released"); call it at import of the app's models module."""
    if choices in _audit_action_sets:
        return choices
    clash = set(choices.values) & {value for value, _ in audit_actions()}
    if clash:
        raise ValueError(f"audit actions {sorted(clash)} are already registered")
    _audit_action_sets.append(choices)
    return choices


class AuditEvent(models.Model):
    """Append-only history: who changed what, when, from which status to which.

    Every event belongs to a team. Its subject is any object (`subject`,
    generic: a quota request, a flavor, a webhook), or none (a team-level event
    such as an archive). A model that lists its events as an `AuditHistory`
    (quota requests do) cannot be deleted while it has any.
    """

    class Action(models.TextChoices):
        """The team's own actions (teams.actions); each feature registers its own."""

        ARCHIVE = "archive", "Archived"
        TEAM_CREATE = "team_create", "Team created"
        MEMBER_ADD = "member_add", "Member added"
        MEMBER_REMOVE = "member_remove", "Member removed"
        ROLE_CHANGE = "role_change", "Role changed"

    # None for events of no team (a flavor's capacity changed).
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="audit_events", null=True, blank=True
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    subject_type = models.ForeignKey(
        ContentType, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    subject_id = models.CharField(max_length=64, blank=True)
    subject = GenericForeignKey("subject_type", "subject_id")
    action = models.CharField(max_length=32, choices=audit_actions)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "gpu_requests_auditevent"
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(fields=["subject_type", "subject_id"]),
            # A team's recent events (dashboard, team history), newest first.
            models.Index(F("team"), F("created_at").desc(), name="audit_team_newest"),
            # A team's latest decisions by people about one kind of subject (the
            # dashboard: quota requests'): read a few a team. "submit" is the quota
            # feature's (gpu_requests.models.QuotaAction.SUBMIT), written as the
            # string the database stores since teams imports no feature; the index
            # stays with the model whose table it is on.
            models.Index(
                F("team"),
                F("subject_type"),
                F("created_at").desc(),
                F("id").desc(),
                name="audit_team_decisions",
                condition=Q(actor__isnull=False) & ~Q(action="submit"),
            ),
        ]

    def __str__(self):
        who = self.actor or "system"
        return f"{self.created_at:%Y-%m-%d %H:%M} {who} {self.action}"

    @classmethod
    def label_of(cls, action):
        """The past-tense word for an action ("Approved"), whichever app defined it."""
        return dict(audit_actions()).get(action, action)

    @classmethod
    def record(cls, *, team_id, action, subject=None, actor=None, reason="", **statuses):
        """Append one event; `subject` is any saved model instance, or None."""
        if subject is not None:  # (None would set subject_id to NULL, not "")
            statuses["subject"] = subject
        return cls.objects.create(
            team_id=team_id, action=action, actor=actor, reason=reason, **statuses
        )


_audit_action_sets = [AuditEvent.Action]


class AuditHistory(GenericRelation):
    """An object's audit events (those whose `subject` it is) as a relation:
    `obj.events`, prefetchable. Like a PROTECT foreign key, it keeps the object
    while it has history: deleting it raises ProtectedError (a plain
    GenericRelation would delete the events with it)."""

    def __init__(self, **kwargs):
        super().__init__(
            AuditEvent, content_type_field="subject_type", object_id_field="subject_id", **kwargs
        )

    def bulk_related_objects(self, objs, using=DEFAULT_DB_ALIAS):
        # The deletion's collector asks for the rows to delete with `objs`: a query.
        events = super().bulk_related_objects(objs, using)
        if events.exists():
            raise models.ProtectedError(
                f"Cannot delete some instances of model {objs[0].__class__.__name__!r} "
                "because they have audit events (the history outlives nothing).",
                list(events),
            )
        return events.none()
