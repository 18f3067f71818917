import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

PREFIX = "gpp_"  # "GPU portal personal": tells these apart from admin-made tokens


def digest(key):
    """Only this is stored: a leaked database row is not a working token."""
    return hashlib.sha256(key.encode()).hexdigest()


class PersonalTokenQuerySet(models.QuerySet):
    def usable(self, now=None):
        return self.filter(revoked_at=None, expires_at__gt=now or timezone.now())


class PersonalToken(models.Model):
    """An API token a user made for themself; it acts as that user."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_tokens"
    )
    name = models.CharField(max_length=100)
    key_digest = models.CharField(max_length=64, unique=True)
    # The first characters, shown in lists so a user can tell tokens apart.
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = PersonalTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.user} {self.name} ({self.hint}…)"

    @property
    def status(self):
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "active"
