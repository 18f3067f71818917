from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.core.validators import MaxLengthValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse

from cluster.models import Flavor
from teams.inputs import MAX_TEXT_LENGTH, validate_visible
from teams.models import AuditHistory, Team, register_audit_actions


class QuotaAction(models.TextChoices):
    """A quota request's audit actions (gpu_requests.actions)."""

    SUBMIT = "submit", "Submitted"
    APPROVE = "approve", "Approved"
    REJECT = "reject", "Rejected"
    CANCEL = "cancel", "Cancelled"
    REVOKE = "revoke", "Revoked"
    ACTIVATE = "activate", "Activated"
    EXPIRE = "expire", "Expired"
    END_EARLY = "end_early", "Ended early"
    FOLLOW_UP = "follow_up", "Follow-up asked"
    COMMENT = "comment", "Commented"


register_audit_actions(QuotaAction)


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
    justification = models.TextField(
        validators=[MaxLengthValidator(MAX_TEXT_LENGTH), validate_visible]
    )
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
    # Its audit events, oldest first; a request with any is never deleted.
    events = AuditHistory()

    objects = QuotaRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
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


class Comment(models.Model):
    """A message on a request, from its requester, the team's managers or a reviewer."""

    quota_request = models.ForeignKey(
        QuotaRequest, on_delete=models.PROTECT, related_name="comments"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField(validators=[MaxLengthValidator(4000), validate_visible])
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
