from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.urls import reverse

from gpu_requests import devices
from teams.models import Team

# The one limit on what people type: a request's justification and a
# decision's reason, in the web form, the API and the admin alike. Longer text
# is refused with a field error (never cut); pages show a counter against it.
MAX_TEXT_LENGTH = 2000

# Extended resource names as the device plugins publish them.
resource_name_validator = RegexValidator(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
    "Not a Kubernetes resource name, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb.",
)
# DeviceClass names: DNS subdomains, as Kubernetes validates object names.
device_class_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "Not a DeviceClass name: lowercase letters, digits, '-' and '.', e.g. gpu.nvidia.com.",
)


class Flavor(models.Model):
    """One entry of the GPU catalog: what a team can ask quota for.

    Held one of two ways: an extended resource (`resource_name`, e.g.
    nvidia.com/gpu, on nodes matching `node_selector`), or by Dynamic Resource
    Allocation (`device_class`, optionally narrowed by `device_selector`, CEL
    in the subset of `gpu_requests.devices`). For a DRA flavor `resource_name`
    is the quota key that counts the class's devices
    (`<class>.deviceclass.resource.k8s.io/devices`), so everything keyed by
    resource name (quota, shared-cap notes, usage rows) treats both alike.
    """

    class Sharing(models.TextChoices):
        WHOLE = "whole", "Whole GPU"
        MIG = "mig", "MIG slice"
        TIME_SLICED = "time-sliced", "Time-sliced"

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    gpu_model = models.CharField(max_length=100)
    memory_gb = models.PositiveIntegerField("memory (GB)")
    sharing = models.CharField(max_length=16, choices=Sharing.choices, default=Sharing.WHOLE)
    resource_name = models.CharField(
        max_length=253, default="nvidia.com/gpu", validators=[resource_name_validator]
    )
    node_selector = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    device_class = models.CharField(
        "DeviceClass",
        max_length=200,
        blank=True,
        validators=[device_class_validator],
        help_text="Set for a DRA flavor (e.g. gpu.nvidia.com); empty for an extended resource.",
    )
    device_selector = models.TextField(
        "device selector (CEL)",
        blank=True,
        help_text=(
            "DRA flavors only: narrows the class's devices, e.g. "
            'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3" && '
            'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
        ),
    )
    capacity = models.PositiveIntegerField(help_text="Devices of this flavor in the cluster.")
    price_per_gpu_hour = models.DecimalField(
        max_digits=10, decimal_places=4, validators=[MinValueValidator(Decimal(0))]
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # A DRA flavor's quota key is its class's: the database refuses any other.
            models.CheckConstraint(
                condition=Q(device_class="")
                | Q(resource_name=Concat(F("device_class"), Value(devices.DRA_QUOTA_SUFFIX))),
                name="dra_flavor_resource_is_its_class",
            ),
            models.CheckConstraint(
                condition=~Q(device_class="") | Q(device_selector=""),
                name="device_selector_needs_a_class",
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def is_dra(self):
        return bool(self.device_class)

    @property
    def selector_terms(self):
        """The device selector as `devices.Term`s (it was validated when saved)."""
        return devices.parse_selector(self.device_selector)

    @property
    def held_as(self):
        """How pods hold this flavor, in one line for pages."""
        if self.is_dra:
            narrowed = f" where {self.device_selector}" if self.device_selector else ""
            return f"DRA: devices of DeviceClass {self.device_class}{narrowed}"
        selector = ", ".join(f"{k}={v}" for k, v in sorted((self.node_selector or {}).items()))
        return f"Extended resource {self.resource_name}" + (
            f" on nodes labelled {selector}" if selector else ""
        )

    def clean(self):
        super().clean()
        if not self.device_class:
            if self.device_selector:
                raise ValidationError(
                    {"device_selector": "A device selector needs a DeviceClass (a DRA flavor)."}
                )
            if devices.is_dra_quota_resource(self.resource_name or ""):
                raise ValidationError(
                    {"resource_name": "This is a DeviceClass's quota key: set the DeviceClass."}
                )
            return
        if self.node_selector:
            raise ValidationError(
                {
                    "node_selector": "A DRA flavor picks devices, not nodes: leave the node "
                    "selector empty and narrow the devices with the device selector."
                }
            )
        try:
            devices.parse_selector(self.device_selector)
        except devices.SelectorError as exc:
            raise ValidationError({"device_selector": str(exc)}) from None
        self.resource_name = devices.quota_resource(self.device_class)

    def shares_resource_with(self, flavors=None):
        """The other flavors of `flavors` (default: the whole catalog, one query)
        that a single quota key cannot tell apart from this one."""
        flavors = Flavor.objects.all() if flavors is None else flavors
        group = shared_resource_names(flavors).get(self.resource_name, [])
        return [flavor for flavor in group if flavor != self]


def shared_resource_names(flavors):
    """{resource name: [flavors]} for each resource name that several of `flavors` use.

    A quota caps a resource name, not a flavor: flavors sharing one share a cap,
    and only node selectors keep their jobs apart.
    """
    by_resource = {}
    for flavor in flavors:
        by_resource.setdefault(flavor.resource_name, []).append(flavor)
    return {name: group for name, group in by_resource.items() if len(group) > 1}


def estimate_cost(gpus, starts_at, ends_at, price_per_gpu_hour):
    """GPUs x hours x price, to the cent; None for an open-ended period."""
    if ends_at is None:
        return None
    hours = Decimal((ends_at - starts_at).total_seconds()) / Decimal(3600)
    return (gpus * hours * price_per_gpu_hour).quantize(Decimal("0.01"), ROUND_HALF_UP)


class QuotaRequestQuerySet(models.QuerySet):
    def reserving(self):
        """Requests that hold capacity: approved (not yet started) and active."""
        return self.filter(status__in=QuotaRequest.RESERVING)

    def overlapping(self, starts_at, ends_at):
        """Requests whose half-open period [start, end) meets [starts_at, ends_at)."""
        overlap = Q(ends_at__isnull=True) | Q(ends_at__gt=starts_at)
        if ends_at is not None:
            overlap &= Q(starts_at__lt=ends_at)
        return self.filter(overlap)


class FollowKind(models.TextChoices):
    MORE_TIME = "more_time", "More time"
    MORE_GPUS = "more_gpus", "More GPUs"


class QuotaRequest(models.Model):
    FollowKind = FollowKind

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"
        REVOKED = "revoked", "Revoked"

    RESERVING = (Status.APPROVED, Status.ACTIVE)

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="quota_requests")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="quota_requests")
    gpus = models.PositiveIntegerField("GPUs", validators=[MinValueValidator(1)])
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True, help_text="Empty for open-ended.")
    justification = models.TextField(validators=[MaxLengthValidator(MAX_TEXT_LENGTH)])
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests"
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    estimated_cost = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    # "Ask for more time / more GPUs" on approved or active quota is a new request,
    # reviewed like any other, linked to the one it follows.
    follows = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="follow_ups"
    )
    follow_kind = models.CharField(max_length=16, choices=FollowKind.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QuotaRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("review_quotarequest", "Can review quota requests")]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="gpus_positive"),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=F("starts_at")),
                name="ends_after_starts",
            ),
        ]
        indexes = [
            models.Index(fields=["flavor", "status", "starts_at"]),
            # The orderings the lists use: newest first (API, request list), per
            # team; oldest pending first (review queue).
            models.Index(F("created_at").desc(), F("id").desc(), name="qr_newest"),
            models.Index(F("team"), F("created_at").desc(), name="qr_team_newest"),
            models.Index(fields=["status", "created_at", "id"], name="qr_status_oldest"),
        ]

    def __str__(self):
        return f"#{self.pk} {self.team} {self.gpus} x {self.flavor}"

    def get_absolute_url(self):
        return reverse("request_detail", args=[self.pk])

    @property
    def hours(self):
        if self.ends_at is None:
            return None
        return (self.ends_at - self.starts_at) / timedelta(hours=1)

    @property
    def hourly_cost(self):
        return self.gpus * self.flavor.price_per_gpu_hour

    @property
    def is_open(self):
        return self.status == self.Status.PENDING


def audit_actions():
    """Every audit action: ours, then those other apps add with `register_audit_actions`.

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

    Every event belongs to a team. Its subject is a quota request
    (`quota_request`, kept with PROTECT so the history outlives nothing), any
    other object (`subject`, generic: a batch job, a namespace), or none (a
    team-level event such as an archive).
    """

    class Action(models.TextChoices):
        SUBMIT = "submit", "Submitted"
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"
        CANCEL = "cancel", "Cancelled"
        REVOKE = "revoke", "Revoked"
        ACTIVATE = "activate", "Activated"
        EXPIRE = "expire", "Expired"
        ARCHIVE = "archive", "Archived"
        SYNC_FAILED = "sync_failed", "Sync failed"
        DRIFT_REPAIRED = "drift_repaired", "Drift repaired"
        DELETE_NAMESPACE = "delete_namespace", "Namespace deleted"
        FOLLOW_UP = "follow_up", "Follow-up asked"
        TEAM_CREATE = "team_create", "Team created"
        MEMBER_ADD = "member_add", "Member added"
        MEMBER_REMOVE = "member_remove", "Member removed"
        ROLE_CHANGE = "role_change", "Role changed"
        COMMENT = "comment", "Commented"
        CHANGE_CAPACITY = "change_capacity", "Capacity changed"

    # None for events of no team (a flavor's capacity changed).
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="audit_events", null=True, blank=True
    )
    quota_request = models.ForeignKey(
        QuotaRequest,
        on_delete=models.PROTECT,
        related_name="events",
        null=True,
        blank=True,
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
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(fields=["subject_type", "subject_id"]),
            # A team's recent events (dashboard, team history), newest first.
            models.Index(F("team"), F("created_at").desc(), name="audit_team_newest"),
            # A team's latest decisions by people (the dashboard): read a few a team.
            models.Index(
                F("team"),
                F("created_at").desc(),
                F("id").desc(),
                name="audit_team_decisions",
                condition=Q(quota_request__isnull=False, actor__isnull=False) & ~Q(action="submit"),
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
        """Append one event; `subject` is any saved model instance (or a quota request)."""
        if isinstance(subject, QuotaRequest):
            statuses["quota_request"] = subject
        elif subject is not None:
            statuses["subject"] = subject
        return cls.objects.create(
            team_id=team_id, action=action, actor=actor, reason=reason, **statuses
        )


_audit_action_sets = [AuditEvent.Action]


class Comment(models.Model):
    """A message on a request, from its requester, the team's managers or a reviewer."""

    quota_request = models.ForeignKey(
        QuotaRequest, on_delete=models.PROTECT, related_name="comments"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField(validators=[MaxLengthValidator(4000)])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self):
        return f"{self.author} on #{self.quota_request_id}"


def valid_time_zone(name):
    """An IANA zone name known to this system ("Europe/Berlin"), else ValidationError."""
    from zoneinfo import available_timezones

    from django.core.exceptions import ValidationError

    if name not in available_timezones():
        raise ValidationError(f"{name!r} is not a time zone name such as Europe/Berlin.")


class UserPreference(models.Model):
    """Per-user settings: the time zone pages show times in and forms read them in."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    time_zone = models.CharField(max_length=64, default="UTC", validators=[valid_time_zone])

    def __str__(self):
        return f"{self.user}: {self.time_zone}"
