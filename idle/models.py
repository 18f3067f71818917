"""Idle policies, the idle state of each workload, exemptions and the log of
what idleness caused (docs/idle.md).

A policy is per flavor, optionally per team. A team's policy only ever
tightens its flavor's: `effective` takes the stricter value of each field, and
`actions.set_policy` refuses a team value looser than the flavor's.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from cluster.models import Flavor
from teams import access
from teams.inputs import MAX_TEXT_LENGTH, validate_visible
from teams.models import Team, register_audit_actions

# A week: past that a policy would never act within a billing month's notice.
MAX_MINUTES = 7 * 24 * 60


class IdleAuditAction(models.TextChoices):
    POLICY_SET = "idle_policy_set", "Idle policy set"
    POLICY_REMOVE = "idle_policy_remove", "Idle policy removed"
    EXEMPT = "idle_exempt", "Exempted from idle policy"
    BRING_BACK = "idle_bring_back", "Brought back after an idle action"


register_audit_actions(IdleAuditAction)


class Mode(models.TextChoices):
    REPORT = "report", "Report only"
    ACT = "act", "Act"


class IdlePolicy(models.Model):
    flavor = models.ForeignKey(Flavor, on_delete=models.CASCADE, related_name="idle_policies")
    team = models.ForeignKey(
        Team,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="idle_policies",
        help_text="Empty: the flavor's policy for every team.",
    )
    idle_minutes = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_MINUTES)],
        help_text="Minutes below the idle threshold before the owner is told.",
    )
    grace_minutes = models.PositiveIntegerField(
        validators=[MaxValueValidator(MAX_MINUTES)],
        help_text="Minutes from the notice to the action.",
    )
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.REPORT)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name_plural = "idle policies"
        ordering = ["flavor__slug", "team__slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["flavor"], condition=Q(team__isnull=True), name="one_idle_policy_per_flavor"
            ),
            models.UniqueConstraint(fields=["flavor", "team"], name="one_idle_policy_per_team"),
            models.CheckConstraint(
                condition=Q(idle_minutes__gte=1, idle_minutes__lte=MAX_MINUTES)
                & Q(grace_minutes__lte=MAX_MINUTES),
                name="idle_policy_minutes_in_range",
            ),
        ]

    def __str__(self):
        scope = self.team.slug if self.team_id else "every team"
        return f"{self.flavor.slug} ({scope}): {self.words()}"

    def words(self):
        state = self.get_mode_display().lower() if self.enabled else "disabled"
        return f"idle {self.idle_minutes} min, grace {self.grace_minutes} min, {state}"

    def looser_fields(self, base):
        """{field: why} where this (team) policy is looser than `base` (the flavor's)."""
        if base is None:
            return {}
        looser = {}
        if self.idle_minutes > base.idle_minutes:
            looser["idle_minutes"] = f"At most {base.idle_minutes}, the flavor's policy."
        if self.grace_minutes > base.grace_minutes:
            looser["grace_minutes"] = f"At most {base.grace_minutes}, the flavor's policy."
        if base.mode == Mode.ACT and self.mode != Mode.ACT:
            looser["mode"] = "The flavor's policy acts; a team's may not only report."
        if base.enabled and not self.enabled:
            looser["enabled"] = "The flavor's policy is enabled; a team's may not disable it."
        return looser


def effective(base, team_policy):
    """The policy in force for a team: the stricter value of each field of the
    flavor's (`base`) and the team's, either of which may be None. A plain
    IdlePolicy (unsaved) or None when neither applies."""
    policies = [p for p in (base, team_policy) if p is not None and p.enabled]
    if not policies:
        return None
    return IdlePolicy(
        flavor_id=policies[0].flavor_id,
        team_id=team_policy.team_id if team_policy else None,
        idle_minutes=min(p.idle_minutes for p in policies),
        grace_minutes=min(p.grace_minutes for p in policies),
        mode=Mode.ACT if any(p.mode == Mode.ACT for p in policies) else Mode.REPORT,
        enabled=True,
    )


def visible_policies(user):
    """The policies `user` reads: the flavors' and their teams' (every one for admins)."""
    policies = IdlePolicy.objects.select_related("flavor", "team")
    if access.can_review(user):
        return policies
    return policies.filter(team=None) | policies.filter(team__in=access.teams_for(user))


@dataclass
class Applying:
    """The policies of one flavor that apply to a team, and what is in force of them."""

    flavor: Flavor
    flavor_policy: "IdlePolicy | None"
    team_policy: "IdlePolicy | None"

    @property
    def in_force(self):
        return effective(self.flavor_policy, self.team_policy)


def applying_to(team):
    """[Applying] for each flavor with a policy for every team or for `team`, by
    flavor name. One query."""
    found = {}
    for policy in IdlePolicy.objects.filter(Q(team=None) | Q(team=team)).select_related("flavor"):
        row = found.setdefault(policy.flavor_id, Applying(policy.flavor, None, None))
        if policy.team_id is None:
            row.flavor_policy = policy
        else:
            row.team_policy = policy
    return sorted(found.values(), key=lambda row: row.flavor.name)


# The longest exemption, in the web form and the API alike (the admin only reads
# them), checked in `actions.exempt`: past it a manager sets the annotation again.
MAX_EXEMPTION = timedelta(days=31)


class Exemption(models.Model):
    """A workload left alone by idle policies until `until` (a manager's consent)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="idle_exemptions")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=253)
    until = models.DateTimeField()
    reason = models.TextField(max_length=MAX_TEXT_LENGTH, validators=[validate_visible])
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.kind} {self.namespace}/{self.name} until {self.until:%Y-%m-%d %H:%M}"


class IdleState(models.Model):
    """What the evaluation knows of one workload: since when it is idle, when its
    owner was told, when the action is due and what was done."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="idle_states")
    flavor = models.ForeignKey(Flavor, on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=253)
    gpus = models.PositiveIntegerField(default=0)
    idle_since = models.DateTimeField(null=True, blank=True)
    announced_at = models.DateTimeField(null=True, blank=True)
    action_due_at = models.DateTimeField(null=True, blank=True)
    acted_at = models.DateTimeField(null=True, blank=True)
    # The replicas a Deployment or StatefulSet had when the portal scaled it to
    # zero: what "Bring it back" restores. Recorded before the scale-down, and
    # never read from the object (its members can write its annotations).
    previous_replicas = models.PositiveIntegerField(null=True, blank=True)
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "kind", "name"], name="one_idle_state_per_workload"
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.namespace}/{self.name}"


class IdleAction(models.Model):
    """The log: every notice, withdrawal and action (or, in report-only mode, the
    action that would have been taken and the GPU-hours it would have given back)."""

    class Kind(models.TextChoices):
        ANNOUNCED = "announced", "Announced"
        WITHDRAWN = "withdrawn", "Notice withdrawn"
        SUSPENDED = "suspended", "Suspended and requeued"
        SCALED_TO_ZERO = "scaled_to_zero", "Scaled to zero"
        REMINDED = "reminded", "Owner reminded"
        WOULD_ACT = "would_act", "Would have acted (report only)"
        RESTORED = "restored", "Brought back"
        FAILED = "failed", "Action failed (tried again)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="idle_actions")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    namespace = models.CharField(max_length=63)
    workload_kind = models.CharField(max_length=32)
    workload_name = models.CharField(max_length=253)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    mode = models.CharField(max_length=8, choices=Mode.choices)
    at = models.DateTimeField()
    gpus = models.PositiveIntegerField(default=0)
    idle_since = models.DateTimeField(null=True, blank=True)
    action_due_at = models.DateTimeField(null=True, blank=True)
    detail = models.TextField(blank=True)
    # Of a scale-down, a suspension or a report-only "would have acted": GPUs given
    # back from `at` to `ended_at` (brought back, active again, gone); open while None.
    ended_at = models.DateTimeField(null=True, blank=True)
    gpu_seconds = models.BigIntegerField(default=0)

    GIVES_BACK = ("scaled_to_zero", "suspended", "would_act")

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["team", "at"])]

    def __str__(self):
        return (
            f"{self.get_kind_display()}: {self.workload_kind} {self.namespace}/{self.workload_name}"
        )

    def gpu_hours(self, now):
        """GPU-hours given back (or, report-only, that would have been) until `now`."""
        if self.kind not in self.GIVES_BACK:
            return 0
        if self.ended_at is not None:
            return self.gpu_seconds / 3600
        return self.gpus * max((now - self.at).total_seconds(), 0) / 3600
