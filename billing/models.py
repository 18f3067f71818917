"""The rate card, budgets and the hourly usage ledger.

Usage is kept in whole GPU-seconds (BigInteger): exact, cheap to sum, and
every figure of an hour adds up without rounding. Pages and the API show
GPU-hours (seconds / 3600). Each ledger row carries the price per GPU-hour in
force for its hour, so cost is one SQL expression (see `cost_expression`).
"""

import re
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import DecimalField, F, Func, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from cluster.models import Flavor
from teams.models import Team, register_audit_actions

MIG_PROFILE = re.compile(r"mig-(\d+)g\.(\d+)gb$")


class BudgetAction(models.TextChoices):
    SET = "budget_set", "Budget set"
    REMOVE = "budget_remove", "Budget removed"
    SPENT = "budget_spent", "Budget spent: GPU work held"
    LIFTED = "budget_lifted", "Budget hold lifted"


register_audit_actions(BudgetAction)


class Rate(models.Model):
    """One row of the rate card: a flavor's price from `effective_from` on.

    Append-only: a price change is a new row; a row is never edited, so the
    ledger of any past hour can always be priced again the same way. A MIG
    flavor without its own price is priced as a fraction of its parent's price
    in force at the same hour, by compute slices (3g.40gb = 3/7) or by memory
    (40 GB of the parent's 80 GB).
    """

    class MigBasis(models.TextChoices):
        COMPUTE = "compute", "Compute slices (of 7)"
        MEMORY = "memory", "Memory"

    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="rates")
    effective_from = models.DateTimeField(help_text="Hour-aligned, UTC.")
    price_per_gpu_hour = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Empty for a MIG slice priced as a fraction of its parent.",
    )
    mig_parent = models.ForeignKey(
        Flavor, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    mig_basis = models.CharField(max_length=8, choices=MigBasis.choices, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["flavor", "effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["flavor", "effective_from"], name="one_rate_per_start"),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__isnull=False)
                | (Q(mig_parent__isnull=False) & ~Q(mig_basis="")),
                name="rate_priced_or_derived",
            ),
        ]

    def __str__(self):
        return f"{self.flavor} from {self.effective_from:%Y-%m-%d %H:%M}"


def mig_shape(flavor):
    """(compute slices of 7, memory GB) of a MIG flavor, else None: from its
    resource name (`nvidia.com/mig-3g.40gb`), or for a DRA flavor from the
    profile its device selector names (`...profile == "3g.40gb"`)."""
    match = MIG_PROFILE.search(flavor.resource_name)
    if not match and flavor.device_class:
        profiles = [
            term.value
            for term in flavor.selector_terms
            if term.kind == "attribute" and term.name == "profile" and term.op == "=="
        ]
        match = MIG_PROFILE.search(f"mig-{profiles[0]}") if profiles else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def mig_fraction(flavor, parent, basis):
    """The share of `parent` one `flavor` slice is, as a Decimal (None if not MIG)."""
    shape = mig_shape(flavor)
    if shape is None:
        return None
    if basis == Rate.MigBasis.MEMORY:
        return Decimal(shape[1]) / Decimal(parent.memory_gb or 1)
    return Decimal(shape[0]) / Decimal(7)


# A monthly budget's limits, in the team page's form, the API and the admin alike
# (their fields take these validators; `actions.set_budget` runs them too).
MIN_BUDGET = Decimal("0.01")
MAX_BUDGET = Decimal("999999999999.99")  # below 10^12: what 14 digits with 2 decimals hold
BUDGET_VALIDATORS = [MinValueValidator(MIN_BUDGET), MaxValueValidator(MAX_BUDGET)]


class Budget(models.Model):
    """A team's monthly spending goal, in `PORTAL_CURRENCY`: soft (alerts at 50, 80
    and 100 %) or hard (binds: batch jobs are released only within it, at their
    maximum runtime's cost, and once the team's running total reaches it, new GPU
    work is held, in the namespace too, and running batch work stopped as
    `when_spent` says; docs/billing.md, "Budgets")."""

    class Mode(models.TextChoices):
        SOFT = "soft", "Soft: alerts only"
        HARD = "hard", "Hard: alerts, and GPU work past it is held"

    class WhenSpent(models.TextChoices):
        STOP_RUNNING = "stop_running", "Stop running batch jobs, and hold new GPU work"
        HOLD_NEW = "hold_new", "Hold new GPU work only: running batch jobs finish"

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="budget")
    monthly_amount = models.DecimalField(
        max_digits=14, decimal_places=2, validators=BUDGET_VALIDATORS
    )
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.SOFT)
    # A hard budget's rule once the running total reaches it.
    when_spent = models.CharField(
        max_length=16, choices=WhenSpent.choices, default=WhenSpent.STOP_RUNNING
    )
    # When the running total reached this hard budget in the current month: the
    # team's GPU work is held until the month turns or the budget is raised
    # (billing.actions.enforce_budgets). Empty while it is not spent.
    spent_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.team}: {self.monthly_amount}/month"


class BudgetChange(models.Model):
    """Append-only: a team's monthly budget from `changed_at` on (None: removed),
    written by `actions.set_budget`. A month's budget is the last change before
    the month's end, so a past month shows the budget it had, not today's."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_changes")
    monthly_amount = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    changed_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["changed_at", "pk"]

    def __str__(self):
        return f"{self.team}: {self.monthly_amount} from {self.changed_at:%Y-%m-%d %H:%M}"

    @classmethod
    def in_force(cls, team, month_end):
        """The amounts set for `team` (a pk, or an OuterRef) before `month_end`, the
        month's own first (None: removed)."""
        return (
            cls.objects.filter(team=team, changed_at__lt=month_end)
            .order_by("-changed_at", "-pk")
            .values_list("monthly_amount", flat=True)
        )


class BudgetAlert(models.Model):
    """An email sent when a team's month-to-date spend crossed a share of its budget.

    The unique key is what makes it once per threshold per month.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField()
    percent = models.PositiveSmallIntegerField()
    spend = models.DecimalField(max_digits=14, decimal_places=2)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "month", "percent"], name="one_alert")
        ]

    def __str__(self):
        return f"{self.team} {self.month:%Y-%m} {self.percent} %"


class IngestedHour(models.Model):
    """One hour of the ledger: pending until Prometheus answered for it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Ingested"

    hour = models.DateTimeField(primary_key=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    ingested_at = models.DateTimeField(null=True, blank=True)
    # Digest of the rows last written: an unchanged re-ingestion writes nothing.
    digest = models.CharField(max_length=64, blank=True)
    # Seconds between the samples the hour was metered at (the figures' resolution).
    step = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-hour"]

    def __str__(self):
        return f"{self.hour:%Y-%m-%d %H:00} {self.status}"


class UsageFigures(models.Model):
    """GPU-seconds of one hour, split the ways docs/billing.md defines."""

    hour = models.DateTimeField()
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    allocated_seconds = models.BigIntegerField(default=0)
    active_seconds = models.BigIntegerField(default=0)
    idle_seconds = models.BigIntegerField(default=0)
    unmetered_seconds = models.BigIntegerField(default=0)
    # Of allocated, attributed from DRA claims' allocations (cluster.DraAllocation)
    # rather than from kube-state-metrics' requests and the exporter's pod labels.
    dra_seconds = models.BigIntegerField(default=0)
    # Of allocated, on spot nodes: priced with PORTAL_BATCH_SPOT_FACTOR.
    spot_seconds = models.BigIntegerField(default=0)
    # Time of use: the mean of the factors of the row's GPU-seconds (spot
    # factor on spot nodes, a batch window's off-peak factor inside it; 1 else).
    price_factor = models.DecimalField(max_digits=9, decimal_places=6, default=Decimal(1))
    # Price per GPU-hour for this hour: the rate card's (MIG derived) x price_factor.
    price = models.DecimalField(max_digits=12, decimal_places=4)
    # Of allocated, the time of runs lost to a spot reclaim or an XID failure
    # (`LostRun`), in the hour it was used: credited at this hour's price.
    lost_seconds = models.BigIntegerField(default=0, db_default=0)
    # Of lost, the idle part: credited, so never idle cost (idle_figure()).
    lost_idle_seconds = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        abstract = True


class TeamUsage(UsageFigures):
    """Append-only ledger: one row per team, flavor and hour."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="usage")
    reserved_seconds = models.BigIntegerField(default=0)
    reserved_unallocated_seconds = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "flavor", "hour"], name="one_team_usage")
        ]
        indexes = [models.Index(fields=["hour", "team"]), models.Index(fields=["team", "hour"])]

    def __str__(self):
        return f"{self.team} {self.flavor} {self.hour:%Y-%m-%d %H:00}"


class WorkloadUsage(UsageFigures):
    """Append-only ledger: one row per workload (Job or other pod owner) and hour."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="workload_usage")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    gpus = models.PositiveIntegerField(default=0, help_text="Most devices held at once.")
    activity_mean = models.FloatField(null=True)
    # Metered device-steps per 1 % band of engine activity ({"12": 60}): p95 over any span.
    activity_histogram = models.JSONField(default=dict)
    fb_peak_mib = models.PositiveIntegerField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "kind", "name", "flavor", "hour"], name="one_workload_usage"
            )
        ]
        indexes = [models.Index(fields=["team", "hour"])]

    def __str__(self):
        return f"{self.namespace}/{self.kind}/{self.name} {self.hour:%Y-%m-%d %H:00}"


class LostRun(models.Model):
    """A pod's run lost to a spot reclaim or an XID failure, found when the hour
    it ended was metered (that hour's ingestion replaces its rows). Its GPU
    time is credited on the ledger rows of the hours it ran (`lost_seconds`),
    so the credit comes off what each of those hours charged."""

    class Cause(models.TextChoices):
        RECLAIM = "reclaim", "spot reclaim"
        XID = "xid", "XID failure"

    hour = models.DateTimeField(help_text="The hour the run ended in, whose ingestion found it.")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    uid = models.CharField(max_length=128)
    started = models.DateTimeField()
    ended = models.DateTimeField()
    gpus = models.PositiveIntegerField()
    cause = models.CharField(max_length=8, choices=Cause.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["uid", "flavor"], name="one_lost_run")]
        indexes = [models.Index(fields=["hour"]), models.Index(fields=["started", "ended"])]

    def __str__(self):
        return f"{self.namespace}/{self.pod} lost {self.ended:%Y-%m-%d %H:%M} ({self.cause})"


class FlavorHour(models.Model):
    """The platform's line for one flavor and hour: capacity and who holds it.

    capacity = teams' allocated + teams' reserved-but-unallocated
             + other namespaces' allocated + batch set-aside unused + unreserved.
    `unreserved_seconds` is what is left, so the identity holds by
    construction; it is negative when more was promised than exists.
    """

    hour = models.DateTimeField()
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")
    capacity_seconds = models.BigIntegerField(default=0)
    spot_capacity_seconds = models.BigIntegerField(default=0)
    reserved_seconds = models.BigIntegerField(default=0)
    team_allocated_seconds = models.BigIntegerField(default=0)
    team_reserved_unallocated_seconds = models.BigIntegerField(default=0)
    other_allocated_seconds = models.BigIntegerField(default=0)
    batch_set_aside_unused_seconds = models.BigIntegerField(default=0)
    unreserved_seconds = models.BigIntegerField(default=0)
    active_seconds = models.BigIntegerField(default=0)
    price_factor = models.DecimalField(max_digits=9, decimal_places=6, default=Decimal(1))
    price = models.DecimalField(max_digits=12, decimal_places=4)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["flavor", "hour"], name="one_flavor_hour")]

    def __str__(self):
        return f"{self.flavor} {self.hour:%Y-%m-%d %H:00}"


MONEY = DecimalField(max_digits=20, decimal_places=6)


class PerHour(Func):
    """An SQL sum of GPU-seconds (or seconds x price) divided by 3600. The literal
    has a decimal point: SQLite divides integer by integer (1800 / 3600 = 0) and
    casts a bound 3600.0 back to an integer; PostgreSQL keeps the numeric exact."""

    template = "(%(expressions)s / 3600.0)"
    output_field = MONEY


def hours(field, prefix=""):
    """GPU-hours of a seconds column, summed (an SQL expression). `prefix` reaches
    the ledger through a relation (e.g. "usage__" from Team)."""
    column = F(prefix + field) if isinstance(field, str) else field
    return PerHour(Coalesce(Sum(column), 0))


def cost_of(field, prefix="", price=None):
    """Sum(seconds x price) / 3600 for one seconds column (or expression); `price`:
    another price than the row's own (an expression)."""
    return _cost(F(prefix + field) if isinstance(field, str) else field, prefix, price)


def idle_figure(prefix=""):
    """Idle GPU-seconds of ledger rows, less the idle part of runs credited back:
    the one definition of idle every page, card, CSV and API answer sums. A
    credited second is credit, never idle cost."""
    return F(prefix + "idle_seconds") - F(prefix + "lost_idle_seconds")


def allocated_cost(prefix=""):
    """What ledger rows (team or workload) charge for the GPUs they held, less the
    credit for lost runs (an aggregate): a workload's cost on its report card."""
    return _cost(F(prefix + "allocated_seconds") - F(prefix + "lost_seconds"), prefix)


def cost_expression(mode=None, prefix=""):
    """Cost of TeamUsage rows under the charging mode, less the credit for GPU
    time lost to spot reclaims and XID failures (an aggregate)."""
    mode = mode or settings.PORTAL_BILLING_CHARGE
    seconds = F(prefix + "allocated_seconds")
    if mode != "allocation":
        seconds = seconds + F(prefix + "reserved_unallocated_seconds")
    return _cost(seconds - F(prefix + "lost_seconds"), prefix)


def _cost(seconds, prefix, price=None):
    price = F(prefix + "price") if price is None else price
    return PerHour(Coalesce(Sum(seconds * price, output_field=MONEY), Value(Decimal(0))))
