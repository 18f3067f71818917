"""Off-hours batch windows and the jobs planned into them.

A window is a weekly rule in an IANA zone; its occurrences are computed
(`batch.occurrences`), never stored. Its batch capacity per flavor is a
reservation of that flavor for each occurrence. Jobs move through
`BatchJob.Status` only by `batch.jobs`.
"""

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from batch import occurrences
from cluster.models import Flavor
from cluster.outbox import OutboxRow
from teams.inputs import validate_one_line
from teams.models import Team

WEEKDAYS = occurrences.WEEKDAYS


class BatchWindow(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[validate_one_line])
    timezone = models.CharField(
        max_length=64, help_text="IANA time zone of the start and end times, e.g. Europe/Berlin."
    )
    days = models.JSONField(
        default=list, help_text='Days it opens, e.g. ["mon", "tue"] (local, in its time zone).'
    )
    start_time = models.TimeField(help_text="Local time it opens.")
    end_time = models.TimeField(help_text="Local time it closes.")
    end_day = models.CharField(
        max_length=3,
        blank=True,
        choices=[(day, day.title()) for day in WEEKDAYS],
        help_text="For windows longer than a day (Fri 20:00 to Mon 06:00: end day mon). "
        "Empty: it closes at the first end time after it opens.",
    )
    exceptions = models.JSONField(
        default=list,
        blank=True,
        help_text="Local dates (YYYY-MM-DD) on which it does not open: holidays, maintenance.",
    )
    price_factor = models.DecimalField(
        max_digits=5,
        decimal_places=4,
        default=Decimal("0.5"),
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(1))],
        help_text="Off-peak price as a fraction of the on-demand price, e.g. 0.5.",
    )
    spot_allowed = models.BooleanField(default=False, help_text="Jobs may run on spot nodes.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @cached_property
    def rule(self):
        return occurrences.WeeklyRule(
            timezone=self.timezone,
            days=tuple(self.days),
            start=self.start_time,
            end=self.end_time,
            end_day=self.end_day or None,
            exceptions=frozenset(self.exceptions or ()),
        )

    def occurrences(self, starts_at, ends_at):
        """Occurrences that meet [starts_at, ends_at), oldest first."""
        return self.rule.between(starts_at, ends_at)

    @property
    def summary(self):
        return self.rule.describe()


class WindowCapacity(models.Model):
    """GPUs of one flavor set aside for batch in every occurrence of a window."""

    window = models.ForeignKey(BatchWindow, on_delete=models.CASCADE, related_name="capacities")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="batch_capacities")
    gpus = models.PositiveIntegerField("GPUs", validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["flavor__name"]
        constraints = [
            models.UniqueConstraint(fields=["window", "flavor"], name="one_capacity_per_flavor"),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="batch_capacity_positive"),
        ]

    def __str__(self):
        return f"{self.window}: {self.gpus} x {self.flavor}"


class ImageRule(models.Model):
    """An allowed image prefix: a registry (`nvcr.io/`) or a repository path in one."""

    prefix = models.CharField(
        max_length=255,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z0-9][a-z0-9._:/-]*$",
                "A registry or repository prefix in lowercase, e.g. nvcr.io/nvidia/ or "
                "docker.io/library/.",
            )
        ],
        help_text="Images are compared in full form: python:3.12 is docker.io/library/python:3.12.",
    )
    note = models.CharField(max_length=200, blank=True, validators=[validate_one_line])

    class Meta:
        ordering = ["prefix"]

    def __str__(self):
        return self.prefix


class BatchJobQuerySet(models.QuerySet):
    def waiting(self):
        """Jobs the planner may (re)plan: not yet on their way to the cluster's nodes."""
        return self.filter(status__in=BatchJob.PLANNABLE)


class BatchJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        PLANNED = "planned", "Planned"
        RELEASED = "released", "Released"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        DEADLINE_EXCEEDED = "deadline_exceeded", "Deadline exceeded"
        CANCELLED = "cancelled", "Cancelled"
        PREEMPTED = "preempted", "Preempted"

    PLANNABLE = (Status.QUEUED, Status.PLANNED)
    # On the cluster and holding batch capacity of their occurrence.
    HOLDING = (Status.RELEASED, Status.RUNNING)
    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.DEADLINE_EXCEEDED, Status.CANCELLED)

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="batch_jobs")
    name = models.CharField(max_length=100, validators=[validate_one_line])
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="batch_jobs")
    image = models.CharField(max_length=512)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    # [{"name": "X", "value": "1"} | {"name": "X", "secret": {"name": s, "key": k}}]
    env = models.JSONField(default=list, blank=True)
    gpus = models.PositiveIntegerField("GPUs per pod", validators=[MinValueValidator(1)])
    parallelism = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    completions = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    expected_runtime_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    max_runtime_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    spot_allowed = models.BooleanField(default=False)
    priority = models.IntegerField(
        default=0, help_text="Within the team: higher goes first (-100 to 100)."
    )
    annotations = models.JSONField(default=dict, blank=True, help_text="Pod annotations.")
    # The target: any window that fits (both empty), a window, or one occurrence of it.
    target_window = models.ForeignKey(
        BatchWindow, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    target_opens_at = models.DateTimeField(null=True, blank=True)

    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    # The plan: an occurrence of a window, and a start inside it.
    window = models.ForeignKey(
        BatchWindow, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    opens_at = models.DateTimeField(null=True, blank=True)
    closes_at = models.DateTimeField(null=True, blank=True)
    planned_start = models.DateTimeField(null=True, blank=True, db_index=True)
    planned_end = models.DateTimeField(null=True, blank=True)
    explanation = models.TextField(blank=True)
    # The planner's first estimate of its start, kept as it was: what batch.eta
    # measures the actual start against to calibrate the ranges it shows.
    first_eta = models.DateTimeField(null=True, blank=True)

    estimated_cost = models.DecimalField(max_digits=14, decimal_places=2)
    on_demand_cost = models.DecimalField(max_digits=14, decimal_places=2)

    released_at = models.DateTimeField(null=True, blank=True)
    # activeDeadlineSeconds given at release: min(max runtime, time left to the close).
    deadline_seconds = models.PositiveIntegerField(null=True, blank=True)
    # Pods lost to disruptions (spot reclaims), by uid, so each is counted once.
    disrupted_pods = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lost_gpu_minutes = models.PositiveIntegerField(default=0)
    # An admin let it run past its team's hard budget (batch.actions.release_past_budget).
    budget_override = models.BooleanField(default=False)
    # What it holds of its team's budget from its release to its end: its GPUs for its
    # whole deadline (activeDeadlineSeconds) at its price. Billing counts it at that
    # bound while it runs, and at what it used once it ended (docs/billing.md).
    reserved_cost = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    # GPU-seconds it held, recorded when it ends: the "recent usage" of fair shares.
    used_gpu_seconds = models.PositiveBigIntegerField(default=0)
    cluster_message = models.TextField(blank=True)
    cluster_events = models.JSONField(default=list, blank=True)
    log_tail = models.TextField(blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="batch_jobs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BatchJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(parallelism__lte=F("completions")), name="parallelism_le_completions"
            ),
            models.CheckConstraint(
                condition=Q(max_runtime_minutes__gte=F("expected_runtime_minutes")),
                name="max_runtime_ge_expected",
            ),
        ]
        indexes = [
            models.Index(fields=["flavor", "status", "opens_at"]),
            # The job list, newest first: all jobs (admins), or one team's.
            models.Index(F("created_at").desc(), F("id").desc(), name="batch_job_newest"),
            models.Index(
                F("team"), F("created_at").desc(), F("id").desc(), name="batch_job_team_newest"
            ),
            # The calendar: the jobs of a window's openings within the horizon.
            models.Index(fields=["window", "opens_at"], name="batch_job_window_opening"),
        ]

    def __str__(self):
        return f"#{self.pk} {self.name} ({self.team})"

    @property
    def total_gpus(self):
        """GPUs the job holds while it runs: every pod at once."""
        return self.gpus * self.parallelism

    @property
    def max_runtime(self):
        return timedelta(minutes=self.max_runtime_minutes)

    @property
    def expected_runtime(self):
        return timedelta(minutes=self.expected_runtime_minutes)

    @property
    def cost_bound(self):
        """What it may cost at most: its estimate (at its expected runtime) taken to its
        maximum runtime, the deadline the portal gives it. What a hard budget checks."""
        bound = self.estimated_cost * self.max_runtime_minutes / self.expected_runtime_minutes
        return bound.quantize(Decimal("0.01"), ROUND_HALF_UP)

    @property
    def price_factor(self):
        """Its window's off-peak factor, times the spot factor where it may run on spot
        (1 outside a window): how its estimates and its cost are priced."""
        factor = Decimal(1)
        if self.window is not None:
            factor = self.window.price_factor
            if self.spot_allowed and self.window.spot_allowed:
                factor *= settings.PORTAL_BATCH_SPOT_FACTOR
        return factor

    def cost_of(self, seconds):
        """What `seconds` of all its GPUs cost at its price (flavor and window loaded)."""
        gpu_hours = Decimal(seconds * self.total_gpus) / Decimal(3600)
        cost = gpu_hours * self.flavor.price_per_gpu_hour * self.price_factor
        return cost.quantize(Decimal("0.01"), ROUND_HALF_UP)

    @property
    def kubernetes_name(self):
        """Deterministic, so a retried create lands on the same Job."""
        return f"batch-{self.pk}"

    @property
    def is_finished(self):
        return self.status in self.FINISHED

    @property
    def can_cancel(self):
        """Waiting, or on the cluster (its Job is deleted and the time so far charged)."""
        return self.status in self.PLANNABLE or self.status in self.HOLDING

    def runtime(self, now):
        """How long it has run (to `now` while it runs), or None if it never started."""
        if self.started_at is None:
            return None
        end = self.finished_at if self.is_finished else now
        return max(end - self.started_at, timedelta(0)) if end else None


class BatchJobEvent(models.Model):
    """A job's status history: one row per transition, append-only."""

    class Action(models.TextChoices):
        SUBMIT = "submit", "Submitted"
        CANCEL = "cancel", "Cancelled"
        BUDGET_RELEASE = "budget_release", "Released past the budget"
        PLAN = "plan", "Planned"
        REPLAN = "replan", "Planned again"
        UNPLAN = "unplan", "Back in the queue"
        RELEASE = "release", "Released"
        START = "start", "Started"
        FINISH = "finish", "Finished"
        REQUEUE = "requeue", "Requeued after a reclaim"
        IDLE_REQUEUE = "idle_requeue", "Requeued: idle"
        BUDGET_STOP = "budget_stop", "Stopped: budget spent"

    job = models.ForeignKey(BatchJob, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    action = models.CharField(max_length=32, choices=Action.choices)
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self):
        return f"{self.job_id} {self.action} {self.from_status}->{self.to_status}"


class TeamShare(models.Model):
    """A team's weight in the planner's fair shares (teams without a row weigh 1)."""

    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="batch_share"
    )
    weight = models.DecimalField(
        max_digits=6,
        decimal_places=2,
        default=Decimal(1),
        validators=[MinValueValidator(Decimal("0.01"))],
    )

    def __str__(self):
        return f"{self.team}: {self.weight}"


class PlannerState(models.Model):
    """One row: the lock planner runs take, and when the last one ran."""

    dirty = models.BooleanField(default=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_reason = models.CharField(max_length=100, blank=True)
    last_jobs = models.PositiveIntegerField(default=0)
    last_seconds = models.FloatField(default=0)
    # The no-starvation counters, carried from run to run (batch.planner.Waiting):
    # {flavor id: {"through": [opens_at, window id], "before": {team id: n}, "after": ...}}.
    waiting = models.JSONField(default=dict, blank=True)

    def __str__(self):
        return f"planner, last run {self.last_run_at}"

    @classmethod
    def locked(cls):
        """The row, locked until the transaction ends: planner runs queue up here."""
        cls.objects.get_or_create(pk=1)
        return cls.objects.select_for_update().get(pk=1)


class JobSync(OutboxRow):
    """The outbox row of a job: the cluster's Job made to match the job's status."""

    job = models.OneToOneField(BatchJob, on_delete=models.CASCADE, primary_key=True)
    last_error = models.TextField(blank=True)

    def __str__(self):
        return f"sync of {self.job_id} ({self.synced_generation}/{self.generation})"


class WatchState(models.Model):
    """One row: where the watch of batch Jobs resumes, and who is watching (a lease)."""

    resource_version = models.CharField(max_length=64, blank=True)
    listed_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.CharField(max_length=32, blank=True)

    def __str__(self):
        return f"watch at {self.resource_version or 'start'}"
