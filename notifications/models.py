"""Outgoing webhooks: one per team (its managers set it) and one for the admins,
and a delivery row per notice and hook, which is the delivery log."""

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.urls import reverse

from cluster.outbox import OutboxRow
from teams.models import Team, register_audit_actions

MAX_URL_LENGTH = 2000


class NotificationAction(models.TextChoices):
    WEBHOOK_SET = "webhook_set", "Webhook set"
    WEBHOOK_SECRET = "webhook_secret", "Webhook secret changed"
    WEBHOOK_REMOVE = "webhook_remove", "Webhook removed"


register_audit_actions(NotificationAction)


class Webhook(models.Model):
    """Where a team's notices (or, with no team, every team's: the admins') are POSTed."""

    # None: the admins' hook, which gets every notice (there is at most one).
    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="webhook"
    )
    url = models.URLField("URL", max_length=MAX_URL_LENGTH)
    # The HMAC key: shown in full once, when made; the portal needs it to sign.
    secret = models.CharField(max_length=100)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # Team ids start at 1: the admins' hook (no team) is the only 0.
            models.UniqueConstraint(Coalesce("team", 0), name="one_webhook_per_team_or_admins"),
        ]

    def __str__(self):
        return f"{self.team or 'admins'}: {self.url}"

    def get_absolute_url(self):
        if self.team_id is None:
            return reverse("admin_webhooks")
        return reverse("team_webhook", args=[self.team.slug])

    @property
    def secret_hint(self):
        """What pages show of the secret: its kind and last four characters."""
        return f"{self.secret[:6]}…{self.secret[-4:]}"


class Delivery(OutboxRow):
    """One notice POSTed to one hook, with each attempt's outcome (the log).

    An outbox row (cluster/outbox.py) made with generation 1: `synced_generation`
    1 once delivered, `refused_generation` 1 once given up."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    # The exact bytes signed and sent, the same at every attempt.
    body = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["webhook", "-created_at"], name="delivery_hook_newest"),
            # The admins' log, newest first; pruning the oldest.
            models.Index(fields=["-created_at"], name="delivery_newest"),
        ]

    def __str__(self):
        return f"{self.event} to {self.webhook_id}: {self.status}"
