"""Every change billing makes: ingesting hours, the rate card, budgets.

Views, the API, the admin, tasks and the command call these.
"""

import hashlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Value
from django.urls import reverse
from django.utils import timezone

from batch import launch
from billing import batchwindows, metering, prometheus, queries
from billing.models import (
    BUDGET_VALIDATORS,
    Budget,
    BudgetAction,
    BudgetAlert,
    BudgetChange,
    FlavorHour,
    IngestedHour,
    LostRun,
    Rate,
    TeamUsage,
    WorkloadUsage,
    mig_fraction,
)
from billing.rates import FACTOR_PLACES, RateCard, priced, spot_factor
from cluster import clock
from cluster.models import DraAllocation, Flavor
from gpu_requests.models import QuotaRequest
from teams import access, errors, hooks
from teams.emails import one_line
from teams.emails import send as send_email
from teams.formats import money
from teams.models import AuditEvent, Membership, Team
from teams.namespaces import namespace_of
from teams.notices import Notice, absolute

log = logging.getLogger(__name__)
HOUR = timedelta(hours=1)
CENT = Decimal("0.01")
BUDGET_THRESHOLDS = (50, 80, 100)


def hour_floor(moment):
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def check_hour(moment, name="hour"):
    """`moment` if it is an aware, hour-aligned instant; else ValidationError."""
    if timezone.is_naive(moment):
        raise ValidationError({name: "Give a time zone (e.g. 2027-01-04T00:00Z)."})
    if moment != hour_floor(moment):
        raise ValidationError({name: "Must be on the hour (minutes and seconds zero)."})
    return moment.astimezone(UTC)


# --- who is who ---


def teams_by_namespace(teams=None):
    """{namespace: team id} by the portal's own namespace naming (one query)."""
    teams = Team.objects.all() if teams is None else teams
    return {namespace_of(slug): team_id for team_id, slug in teams.values_list("pk", "slug")}


def reserved_seconds(hour):
    """{(team id, flavor id): GPU-seconds of quota in force during the hour} (one query).

    Quota counts while active: from its start to its end, or to its
    revocation (the last change of a revoked request).
    """
    end = hour + HOUR
    rows = QuotaRequest.objects.filter(
        Q(status__in=[QuotaRequest.Status.ACTIVE, QuotaRequest.Status.EXPIRED])
        | Q(status=QuotaRequest.Status.REVOKED, updated_at__gt=hour),
        starts_at__lt=end,
    ).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=hour))
    reserved = {}
    fields = ("team_id", "flavor_id", "gpus", "starts_at", "ends_at", "status", "updated_at")
    for row in rows.values(*fields):
        stop = row["ends_at"] or end
        if row["status"] == QuotaRequest.Status.REVOKED:
            stop = min(stop, row["updated_at"])
        seconds = (min(stop, end) - max(row["starts_at"], hour)).total_seconds()
        if seconds > 0:
            key = (row["team_id"], row["flavor_id"])
            reserved[key] = reserved.get(key, 0) + int(seconds) * row["gpus"]
    return reserved


# --- ingestion ---


def _rows(hour, measured, flavors, card):
    """Ledger rows (unsaved) for one hour; reservations and batch windows come
    from the database (three queries)."""
    reserved = reserved_seconds(hour)
    offpeak = batchwindows.offpeak_factors(hour)
    set_aside = batchwindows.set_aside_seconds(hour)
    rates = {flavor.pk: card.price(flavor.pk, hour) for flavor in flavors}
    spot = settings.PORTAL_BATCH_SPOT_FACTOR

    workload_rows, weighted, covered = [], defaultdict(Decimal), defaultdict(int)
    for (team_id, namespace, kind, name, flavor_id), load in sorted(measured.workload.items()):
        factor = spot_factor(load.spot, load.allocated, spot)
        if kind == "Job":
            factor *= offpeak.get((namespace, name), 1)
        weighted[(team_id, flavor_id)] += load.allocated * factor
        covered[(team_id, flavor_id)] += load.allocated
        workload_rows.append(
            WorkloadUsage(
                hour=hour,
                team_id=team_id,
                namespace=namespace,
                kind=kind[:63],
                name=name[:253],
                flavor_id=flavor_id,
                allocated_seconds=load.allocated,
                active_seconds=load.active,
                idle_seconds=load.idle,
                unmetered_seconds=load.unmetered,
                dra_seconds=load.dra,
                gpus=load.gpus,
                activity_mean=load.activity_mean,
                activity_histogram=load.histogram,
                fb_peak_mib=None if load.fb_peak is None else int(load.fb_peak),
                spot_seconds=load.spot,
                price_factor=factor.quantize(FACTOR_PLACES),
                price=priced(rates[flavor_id], factor),
            )
        )
    team_rows = []
    for key in sorted(set(measured.team) | set(reserved)):
        team_id, flavor_id = key
        figures = measured.team.get(key, metering.Figures())
        held = reserved.get(key, 0)
        # The mean of its workloads' factors by their GPU-seconds (1 for any rest).
        rest = figures.allocated - covered[key]
        factor = (weighted[key] + rest) / figures.allocated if figures.allocated else Decimal(1)
        team_rows.append(
            TeamUsage(
                hour=hour,
                team_id=team_id,
                flavor_id=flavor_id,
                allocated_seconds=figures.allocated,
                active_seconds=figures.active,
                idle_seconds=figures.idle,
                unmetered_seconds=figures.unmetered,
                dra_seconds=figures.dra,
                spot_seconds=figures.spot,
                reserved_seconds=held,
                reserved_unallocated_seconds=max(held - figures.allocated, 0),
                price_factor=factor.quantize(FACTOR_PLACES),
                price=priced(rates[flavor_id], factor),
            )
        )
    flavor_rows = []
    for flavor in flavors:
        mine = [row for row in team_rows if row.flavor_id == flavor.pk]
        other = measured.other.get(flavor.pk, metering.Figures())
        capacity = measured.capacity.get(flavor.pk, flavor.capacity * 3600)
        spot_capacity = measured.spot_capacity.get(flavor.pk, 0)
        batch_used = sum(
            row.allocated_seconds
            for row in workload_rows
            if row.flavor_id == flavor.pk and (row.namespace, row.name) in offpeak
        )
        factor = spot_factor(spot_capacity, capacity, spot)
        row = FlavorHour(
            hour=hour,
            flavor_id=flavor.pk,
            capacity_seconds=capacity,
            spot_capacity_seconds=spot_capacity,
            reserved_seconds=sum(r.reserved_seconds for r in mine),
            team_allocated_seconds=sum(r.allocated_seconds for r in mine),
            team_reserved_unallocated_seconds=sum(r.reserved_unallocated_seconds for r in mine),
            other_allocated_seconds=other.allocated,
            batch_set_aside_unused_seconds=max(set_aside.get(flavor.pk, 0) - batch_used, 0),
            active_seconds=sum(r.active_seconds for r in mine) + other.active,
            price_factor=factor,
            price=priced(rates[flavor.pk], factor),
        )
        row.unreserved_seconds = capacity - (
            row.team_allocated_seconds
            + row.team_reserved_unallocated_seconds
            + row.other_allocated_seconds
            + row.batch_set_aside_unused_seconds
        )
        flavor_rows.append(row)
    return team_rows, workload_rows, flavor_rows


def _digest(*row_lists):
    skip = {"id", "_state"}
    payload = [
        sorted((k, str(v)) for k, v in vars(row).items() if k not in skip)
        for rows in row_lists
        for row in rows
    ]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


def step_for(hour):
    """The sample step of `hour`: the history's before PORTAL_BILLING_HISTORY_END."""
    end = settings.PORTAL_BILLING_HISTORY_END
    if settings.PORTAL_BILLING_HISTORY_STEP and end and hour < end:
        return settings.PORTAL_BILLING_HISTORY_STEP
    return settings.PORTAL_BILLING_STEP


def ingest_hour(hour, *, now=None):
    """Meter one hour into the ledger. Returns True if rows changed.

    Eight Prometheus queries (ten when pods held DRA devices around the hour,
    read from the inventory's `DraAllocation` rows), then one transaction that replaces the hour's
    rows, or writes nothing when they would come out the same. When
    Prometheus cannot answer, the hour stays pending (with the error and an
    attempt counted) and the PrometheusError is raised: never a zero hour.
    """
    hour = check_hour(hour)
    now = now or timezone.now()
    IngestedHour.objects.get_or_create(hour=hour)
    flavors = list(Flavor.objects.all())
    step = step_for(hour)
    allocations = dra_allocations(hour)
    try:
        answers = metering.fetch_hour(hour, flavors, step, allocations)
    except prometheus.PrometheusError as exc:
        IngestedHour.objects.filter(hour=hour, status=IngestedHour.Status.PENDING).update(
            last_error=str(exc)[:2000], last_attempt_at=now
        )
        IngestedHour.objects.filter(hour=hour).update(attempts=_plus_one())
        raise
    measured = metering.measure(
        answers,
        flavors,
        teams_by_namespace(),
        step,
        settings.PORTAL_BILLING_IDLE_THRESHOLD,
        hour=hour,
        reclaimed=batchwindows.reclaimed_pods(hour),
        allocations=allocations,
    )
    return write_hour(hour, measured, flavors, now=now, step=step)


def dra_allocations(hour):
    """The DRA devices the inventory saw claims give pods around `hour` (one
    query). Generous on both sides: a pod counts only while kube-state-metrics
    saw it running, so a claim seen before or after the hour costs nothing."""
    return list(
        DraAllocation.objects.filter(last_seen__gte=hour - HOUR, first_seen__lt=hour + 2 * HOUR)
    )


def _plus_one():
    return F("attempts") + 1


def _lost_runs(hour, lost):
    """LostRun rows (unsaved) of the runs `measure` found lost in the hour."""
    return [
        LostRun(
            hour=hour,
            team_id=run.team_id,
            flavor_id=run.flavor_id,
            namespace=run.namespace,
            kind=run.kind[:63],
            name=run.name[:253],
            pod=run.pod[:253],
            uid=run.uid[:128],
            started=datetime.fromtimestamp(run.started, UTC),
            ended=datetime.fromtimestamp(run.ended, UTC),
            gpus=run.gpus,
            cause=run.cause,
        )
        for run in lost
    ]


def _hours_of(runs):
    """Every hour a run of `runs` (LostRun rows) held GPUs in."""
    hours = set()
    for run in runs:
        moment = hour_floor(run.started)
        while moment < run.ended:
            hours.add(moment)
            moment += HOUR
    return hours


def credit_lost_runs(hours):
    """Set `lost_seconds` and `lost_idle_seconds` of the ledger rows of `hours`
    from the lost runs that held GPUs in them (three queries, two bulk updates).

    A workload's row is credited the run's GPU-seconds inside its hour (never
    more than it was charged), the idle part first: which of a workload's pods
    was idle is not kept, so it is exact for a run that was its workload's
    only pod in the hour. A team's row is the sum of its workloads'.
    """
    if not hours:
        return
    first, last = min(hours), max(hours) + HOUR
    runs = list(LostRun.objects.filter(started__lt=last, ended__gt=first))
    lost = defaultdict(int)  # (namespace, kind, name, flavor id, hour) -> GPU-seconds
    for run in runs:
        for moment in _hours_of([run]) & hours:
            seconds = min(run.ended, moment + HOUR) - max(run.started, moment)
            key = (run.namespace, run.kind, run.name, run.flavor_id, moment)
            lost[key] += int(seconds.total_seconds()) * run.gpus
    namespaces = {run.namespace for run in runs}
    teams = {run.team_id for run in runs}
    workloads = list(
        WorkloadUsage.objects.filter(hour__in=hours)
        .filter(Q(lost_seconds__gt=0) | Q(namespace__in=namespaces))
        .only(
            "team_id",
            "allocated_seconds",
            "idle_seconds",
            "lost_seconds",
            "lost_idle_seconds",
            *WORKLOAD_KEY,
        )
    )
    sums = defaultdict(lambda: [0, 0])  # (team id, flavor id, hour) -> [lost, lost idle]
    changed = []
    for row in workloads:
        key = tuple(getattr(row, field) for field in WORKLOAD_KEY)
        seconds = min(lost.get(key, 0), row.allocated_seconds)
        idle = min(seconds, row.idle_seconds)
        if (row.lost_seconds, row.lost_idle_seconds) != (seconds, idle):
            row.lost_seconds, row.lost_idle_seconds = seconds, idle
            changed.append(row)
        total = sums[(row.team_id, row.flavor_id, row.hour)]
        total[0] += seconds
        total[1] += idle
    WorkloadUsage.objects.bulk_update(changed, LOST_FIELDS, batch_size=2000)
    team_rows = TeamUsage.objects.filter(hour__in=hours).filter(
        Q(lost_seconds__gt=0) | Q(team_id__in=teams | {row.team_id for row in workloads})
    )
    changed = []
    for row in team_rows.only("team_id", "flavor_id", "hour", "lost_seconds", "lost_idle_seconds"):
        seconds, idle = sums.get((row.team_id, row.flavor_id, row.hour), (0, 0))
        if (row.lost_seconds, row.lost_idle_seconds) != (seconds, idle):
            row.lost_seconds, row.lost_idle_seconds = seconds, idle
            changed.append(row)
    TeamUsage.objects.bulk_update(changed, LOST_FIELDS, batch_size=2000)


WORKLOAD_KEY = ("namespace", "kind", "name", "flavor_id", "hour")
LOST_FIELDS = ["lost_seconds", "lost_idle_seconds"]


def write_hour(hour, measured, flavors, *, now=None, step=None):
    now = now or timezone.now()
    rows = _rows(hour, measured, flavors, RateCard())
    runs = _lost_runs(hour, measured.lost)
    digest = _digest(*rows, runs)
    with transaction.atomic():
        # The row lock serialises two workers on one hour.
        state = IngestedHour.objects.select_for_update().get(hour=hour)
        changed = not (state.status == IngestedHour.Status.DONE and state.digest == digest)
        if changed:
            # Runs found lost before, here or (the same pod) in another hour: their
            # credit is taken back from the hours they ran in, and given again.
            replaced = LostRun.objects.filter(Q(hour=hour) | Q(uid__in=[run.uid for run in runs]))
            credited = _hours_of(list(replaced)) | _hours_of(runs) | {hour}
            replaced.delete()
            for model in (TeamUsage, WorkloadUsage, FlavorHour):
                model.objects.filter(hour=hour).delete()
            team_rows, workload_rows, flavor_rows = rows
            TeamUsage.objects.bulk_create(team_rows, batch_size=2000)
            WorkloadUsage.objects.bulk_create(workload_rows, batch_size=2000)
            FlavorHour.objects.bulk_create(flavor_rows)
            LostRun.objects.bulk_create(runs)
            credit_lost_runs(credited)
        IngestedHour.objects.filter(hour=hour).update(
            status=IngestedHour.Status.DONE,
            digest=digest,
            last_error="",
            last_attempt_at=now,
            attempts=_plus_one(),
            ingested_at=now if changed else state.ingested_at,
            step=step or settings.PORTAL_BILLING_STEP,
        )
        if changed:
            check_budgets(hour)
    return changed


def last_closed_hour(now=None):
    """The newest hour ended at least PORTAL_BILLING_DELAY ago: the last one to meter."""
    now = now or timezone.now()
    return hour_floor(now - timedelta(seconds=settings.PORTAL_BILLING_DELAY)) - HOUR


def newest_metered_hour():
    """The start of the newest ingested hour, or None (one query)."""
    return (
        IngestedHour.objects.filter(status=IngestedHour.Status.DONE)
        .order_by("-hour")
        .values_list("hour", flat=True)
        .first()
    )


def figures_in(now=None):
    """The end of the newest metered hour once every closed hour is metered (the
    beat has caught up: the month's figures are in), else None. Two queries."""
    newest = newest_metered_hour()
    if newest is None or newest < last_closed_hour(now):
        return None
    if IngestedHour.objects.filter(status=IngestedHour.Status.PENDING).exists():
        return None
    return newest + HOUR


def closed_hours(now=None):
    """Hours ended at least PORTAL_BILLING_DELAY ago and not yet ingested, oldest first.

    Marks them pending first (so the admin page lists them), starting after the
    newest ingested hour, or PORTAL_BILLING_BACKFILL_HOURS back on a fresh install.
    """
    last_closed = last_closed_hour(now)
    newest = newest_metered_hour()
    backfill = timedelta(hours=settings.PORTAL_BILLING_BACKFILL_HOURS - 1)
    start = newest + HOUR if newest else last_closed - backfill
    missing = []
    hour = start
    while hour <= last_closed:
        missing.append(IngestedHour(hour=hour))
        hour += HOUR
    IngestedHour.objects.bulk_create(missing, ignore_conflicts=True)
    return list(
        IngestedHour.objects.filter(status=IngestedHour.Status.PENDING, hour__lte=last_closed)
        .order_by("hour")
        .values_list("hour", flat=True)
    )


def on_hold():
    """The first line of PORTAL_BILLING_HOLD_FILE while it exists (history is loading
    into Prometheus), else None. One stat, no query."""
    if not settings.PORTAL_BILLING_HOLD_FILE:
        return None
    try:
        with open(settings.PORTAL_BILLING_HOLD_FILE, encoding="utf-8") as hold:
            return hold.readline().strip()[:300] or "Prometheus is being backfilled."
    except FileNotFoundError:
        return None


def ingest_closed_hours(now=None, limit=None):
    """Ingest pending closed hours, oldest first; stop at the first outage. Nothing
    while on hold: an hour Prometheus has no samples for yet would be metered as zero."""
    if (held := on_hold()) is not None:
        log.info("billing: closed hours wait: %s", held)
        return 0
    done = 0
    for hour in closed_hours(now)[: limit or settings.PORTAL_BILLING_HOURS_PER_RUN]:
        try:
            ingest_hour(hour, now=now)
        except prometheus.PrometheusError as exc:
            log.warning("billing: hour %s stays pending: %s", hour.isoformat(), exc)
            break
        done += 1
    if done:
        enforce_budgets()  # the hours metered may take a team to its hard budget
    return done


# --- rate card ---


def validate_rate(flavor, effective_from, *, price=None, mig_parent=None, mig_basis=""):
    """The rate's start, hour-aligned and UTC; ValidationError naming the field if it is wrong."""
    effective_from = check_hour(effective_from, "effective_from")
    if price is None and mig_parent is None:
        raise ValidationError({"price_per_gpu_hour": "Give a price or a MIG parent to derive it."})
    if price is not None and price < 0:
        raise ValidationError({"price_per_gpu_hour": "A price cannot be negative."})
    if price is None:
        if mig_parent.pk == flavor.pk:
            raise ValidationError({"mig_parent": "A flavor cannot be its own parent."})
        if mig_basis not in Rate.MigBasis.values:
            raise ValidationError({"mig_basis": "Choose compute or memory."})
        if mig_fraction(flavor, mig_parent, mig_basis) is None:
            message = f"{flavor} is not a MIG slice (its resource is {flavor.resource_name})."
            raise ValidationError({"mig_parent": message})
    if Rate.objects.filter(flavor=flavor, effective_from=effective_from).exists():
        raise ValidationError({"effective_from": TAKEN})
    return effective_from


TAKEN = "This flavor already has a rate starting then; add a later one."


def add_rate(flavor, effective_from, *, by, price=None, mig_parent=None, mig_basis=""):
    """Append a price to the rate card and re-price the ledger hours it covers.

    The rate card itself is never rewritten; ledger rows carry the price in
    force for their hour, so a backdated rate re-prices the hours from its
    start to the next rate.
    """
    if not access.can_review(by):
        raise errors.NotAllowed("Only platform admins can change prices.")
    effective_from = validate_rate(
        flavor, effective_from, price=price, mig_parent=mig_parent, mig_basis=mig_basis
    )
    try:
        with transaction.atomic():
            rate = Rate.objects.create(
                flavor=flavor,
                effective_from=effective_from,
                price_per_gpu_hour=price,
                mig_parent=mig_parent if price is None else None,
                mig_basis=mig_basis if price is None else "",
                created_by=by,
            )
            reprice_from(effective_from)
    except IntegrityError:  # another admin's rate for the same start, just now
        raise ValidationError({"effective_from": TAKEN}) from None
    return rate


def reprice_from(start):
    """Set the ledger's prices from `start` on to the rate card's (per flavor and rate span)."""
    card = RateCard()
    for flavor_id in card.flavors:
        later = {r.effective_from for rates in card.rates.values() for r in rates}
        boundaries = sorted({start} | {moment for moment in later if moment > start})
        for begin, end in zip(boundaries, boundaries[1:] + [None], strict=True):
            rate = card.price(flavor_id, begin)
            span = Q(flavor_id=flavor_id, hour__gte=begin)
            if end is not None:
                span &= Q(hour__lt=end)
            # Each row keeps its time-of-use factor; the database rounds to the column.
            for model in (TeamUsage, WorkloadUsage, FlavorHour):
                model.objects.filter(span).update(price=Value(rate) * F("price_factor"))


# --- budgets ---


@transaction.atomic
def set_budget(team, amount, *, by, mode=Budget.Mode.SOFT, when_spent=None):
    """Set (or with None, remove) a team's monthly budget, its mode and what a hard
    one does once spent (`when_spent`, Budget.WhenSpent; unchanged if None, stop
    running batch jobs for a new budget); audited with the old and new values. Its
    managers and platform admins only. A spent hard budget raised above the team's
    running total, made soft or removed lets the team's GPU work go again."""
    if not access.can_manage(by, team):
        raise errors.NotAllowed("Only the team's managers and platform admins set budgets.")
    if amount is not None:
        amount = Decimal(amount)
        problems = []
        for validator in BUDGET_VALIDATORS:
            try:
                validator(amount)
            except ValidationError as exc:
                problems.extend(exc.messages)
        if problems:
            raise ValidationError({"monthly_amount": problems})
    if mode not in Budget.Mode.values:
        raise ValidationError({"mode": f"Give one of {', '.join(Budget.Mode.values)}."})
    if when_spent is not None and when_spent not in Budget.WhenSpent.values:
        choices = ", ".join(Budget.WhenSpent.values)
        raise ValidationError({"when_spent": f"Give one of {choices}."})
    # The team's row is locked, not the budget's, which may not be there yet: two
    # concurrent changes, first ones too, take turns and audit what each replaced.
    Team.objects.select_for_update().only("pk").get(pk=team.pk)
    old = Budget.objects.filter(team=team).first()
    before = "none" if old is None else _budget_words(old.monthly_amount, old.mode, old.when_spent)
    if amount is None:
        if old is None:
            return None
        old.delete()
        budget, action, after = None, BudgetAction.REMOVE, "none"
        if old.spent_at is not None:
            _lifted(old, "the budget was removed", by=by)
    else:
        when_spent = when_spent or (old.when_spent if old else Budget.WhenSpent.STOP_RUNNING)
        budget, _ = Budget.objects.update_or_create(
            team=team, defaults={"monthly_amount": amount, "mode": mode, "when_spent": when_spent}
        )
        action, after = BudgetAction.SET, _budget_words(amount, mode, when_spent)
        if before == after:
            return budget
    AuditEvent.record(team_id=team.pk, action=action, actor=by, reason=f"{before} -> {after}")
    BudgetChange.objects.create(team=team, monthly_amount=amount)
    if budget is not None:
        enforce_budgets(team_ids=[team.pk], reconsider=True, by=by)
        budget.refresh_from_db()
    return budget


def _budget_words(amount, mode, when_spent=None):
    words = f"{amount:.2f} {settings.PORTAL_CURRENCY} a month ({mode})"
    if mode == Budget.Mode.HARD and when_spent:
        words += f", when spent: {when_spent}"
    return words


@dataclass(frozen=True)
class RunningTotal:
    """What a team has spent this month and what its running batch jobs may still
    cost: the ledger to its last metered hour, and batch jobs' use since then, plus
    the rest of each running job's reservation (billing.batchwindows.batch_charges)."""

    spent: Decimal = Decimal(0)
    reserved: Decimal = Decimal(0)

    @property
    def total(self):
        return self.spent + self.reserved


def metered_through(now):
    """The end of the newest hour in the ledger before `now`, or None. One query."""
    newest = (
        IngestedHour.objects.filter(status=IngestedHour.Status.DONE, hour__lt=now)
        .order_by("-hour")
        .values_list("hour", flat=True)
        .first()
    )
    return None if newest is None else min(newest + HOUR, now)


def running_totals(team_ids, now):
    """{team id: RunningTotal} this month, for every team in `team_ids`. Three queries."""
    team_ids = list(team_ids)
    if not team_ids:
        return {}
    month = month_start(now)
    through = max(metered_through(now) or month, month)
    ledger = queries.spend_by_team(month, through)
    batch = batchwindows.batch_charges(team_ids, through, now)
    totals = {}
    for team_id in team_ids:
        used, reserved = batch.get(team_id, (Decimal(0), Decimal(0)))
        totals[team_id] = RunningTotal(ledger.get(team_id, Decimal(0)) + used, reserved)
    return totals


def is_spent(total, amount):
    """A hard budget is spent once what the team spent reaches it, or what it spent
    and its running jobs may still cost goes past it."""
    return total.spent >= amount or total.total > amount


def held_this_month(budget, now):
    return budget.spent_at is not None and budget.spent_at >= month_start(now)


def budget_left(team_ids, now):
    """{team id: what is left this month} of the teams with a hard budget: the budget
    less the running total (`running_totals`), and nothing while the budget is spent
    (held until the month turns or the budget is raised). Four queries."""
    budgets = list(
        Budget.objects.filter(team_id__in=team_ids, mode=Budget.Mode.HARD).only(
            "team_id", "monthly_amount", "spent_at"
        )
    )
    if not budgets:
        return {}
    totals = running_totals([budget.team_id for budget in budgets], now)
    left = {}
    for budget in budgets:
        left[budget.team_id] = budget.monthly_amount - totals[budget.team_id].total
        if held_this_month(budget, now):
            left[budget.team_id] = min(left[budget.team_id], Decimal(0))
    return left


def enforce_budgets(now=None, *, team_ids=None, reconsider=False, by=None):
    """Hold the GPU work of each team whose running total reached its hard budget,
    and let it go again when the month turned (or, with `reconsider`, after a change
    of the budget) and the total is below it. Returns {team id: "spent" | "lifted"}.

    Spent: recorded (`Budget.spent_at`, audited), the team's running batch jobs
    stopped if its rule says so (hooks.budget_spent), its namespace capped at what
    runs (hooks.on_quota_cap through `held_namespaces`, applied by the team's
    sync), and its managers told (a notice and an email). Held, a team stays held
    for the month, whatever its jobs give back, until the budget is raised.
    Four queries for every team, and a few writes per team that changes.
    """
    now = now or clock.now()
    budgets = Budget.objects.filter(Q(mode=Budget.Mode.HARD) | Q(spent_at__isnull=False))
    if team_ids is not None:
        budgets = budgets.filter(team_id__in=team_ids)
    budgets = list(budgets.select_related("team"))
    totals = running_totals(
        [budget.team_id for budget in budgets if budget.mode == Budget.Mode.HARD], now
    )
    done = {}
    for budget in budgets:
        hard = budget.mode == Budget.Mode.HARD
        total = totals.get(budget.team_id, RunningTotal())
        spent = hard and is_spent(total, budget.monthly_amount)
        held = held_this_month(budget, now)
        if held and (spent or not reconsider):
            continue  # held for the month: only a raise or the month's turn lets it go
        with transaction.atomic():
            if spent:
                if _spent(budget, total, now):
                    done[budget.team_id] = "spent"
            elif budget.spent_at is not None:
                if not hard:
                    why = "the budget was made soft"
                elif held:
                    why = "the budget was raised above the team's running total"
                else:
                    why = "a new month began"
                if _lifted(budget, why, by=by):
                    done[budget.team_id] = "lifted"
    return done


def _spent(budget, total, now):
    """Record the budget spent (once, if another run did not just now), apply its rule
    and tell the team. True if this call recorded it."""
    was = Q(spent_at__isnull=True) if budget.spent_at is None else Q(spent_at=budget.spent_at)
    if not Budget.objects.filter(was, pk=budget.pk).update(spent_at=now):
        return False
    budget.spent_at = now
    team = budget.team
    reason = (
        f"{team.name}'s hard budget of {money(budget.monthly_amount)} for "
        f"{now:%B %Y} is spent ({money(total.spent)} spent"
        + (
            f", {money(total.reserved)} more reserved by running batch jobs"
            if total.reserved
            else ""
        )
        + ")."
    )
    stopped = []
    if budget.when_spent == Budget.WhenSpent.STOP_RUNNING:
        stopped = hooks.budget_spent(team.pk, reason=f"Stopped: {reason}", now=now)
    hooks.quota_changed(team.pk)  # the namespace is capped at what runs
    what = f"Stopped {len(stopped)}: {', '.join(stopped)}." if stopped else "Nothing stopped."
    AuditEvent.record(
        team_id=team.pk, action=BudgetAction.SPENT, reason=f"{reason} New GPU work held. {what}"
    )
    facts = [
        ("Team", team.name),
        ("Budget", f"{money(budget.monthly_amount)} a month (hard)"),
        ("Spent", money(total.spent)),
        ("Reserved by running batch jobs", money(total.reserved)),
        ("When spent", Budget.WhenSpent(budget.when_spent).label),
        ("Held until", f"the month turns ({next_month(now):%d %B %Y}) or the budget is raised"),
    ]
    if stopped:
        facts.append(("Stopped", ", ".join(stopped)))
    _tell(
        team,
        "budget_spent",
        f"{team.name} has spent its hard GPU budget: new GPU work is held",
        reason,
        facts,
        data={
            "team": team.slug,
            "monthly_amount": str(budget.monthly_amount),
            "spent": str(total.spent.quantize(CENT)),
            "reserved": str(total.reserved.quantize(CENT)),
            "when_spent": budget.when_spent,
            "stopped": stopped,
        },
    )
    return True


def _lifted(budget, why, *, by=None):
    """Let the team's GPU work go again; True if this call did."""
    # A removed budget (its row deleted, pk None) has nothing left to clear.
    cleared = Budget.objects.filter(pk=budget.pk, spent_at=budget.spent_at)
    if budget.pk is not None and not cleared.update(spent_at=None):
        return False
    budget.spent_at = None
    team = budget.team
    hooks.quota_changed(team.pk)  # the namespace's cap goes
    reason = f"GPU work of {team.name} is no longer held: {why}."
    AuditEvent.record(team_id=team.pk, action=BudgetAction.LIFTED, actor=by, reason=reason)
    _tell(
        team,
        "budget_lifted",
        f"{team.name}'s GPU budget hold is lifted",
        reason,
        [("Team", team.name), ("Why", why)],
        data={"team": team.slug},
    )
    return True


def next_month(now):
    start = month_start(now)
    return (start + timedelta(days=32)).replace(day=1)


def _tell(team, event, title, text, facts, data):
    """The team's owner told: a notice for the webhooks (in this transaction), and an
    email to its managers (every member with an address, without one) after it."""
    url = absolute(reverse("team_page", args=[team.slug]))
    hooks.notice(
        Notice(
            event=event,
            team_id=team.pk,
            title=title,
            url=url,
            text=text,
            facts=tuple(facts),
            data=data,
        )
    )
    recipients = list(
        team.memberships.filter(role=Membership.Role.MANAGER, user__is_active=True)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    ) or list(
        team.memberships.filter(user__is_active=True)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    context = {"title": title, "text": text, "facts": facts, "url": url}
    transaction.on_commit(
        lambda: send_email("budget", f"[GPU portal] {title}", sorted(recipients), context),
        robust=True,
    )


def held_namespaces(team_ids):
    """The namespaces a spent hard budget holds (registered with hooks.on_quota_cap):
    {team id: {resource name: GPUs}} capped at what runs now, the GPUs of the team's
    released and running batch jobs (those its rule left running, and those an admin
    released past the budget). Kubernetes evicts nothing over quota: pods running
    go on, no new one starts. Two queries (one without a held team)."""
    held = list(
        Budget.objects.filter(
            team_id__in=team_ids, mode=Budget.Mode.HARD, spent_at__isnull=False
        ).values_list("team_id", flat=True)
    )
    caps = {team_id: {} for team_id in held}
    for team_id, _, resource, gpus in launch.running_allotment(held) if held else ():
        caps[team_id][resource] = caps[team_id].get(resource, 0) + gpus
    return caps


def month_start(moment):
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def check_budgets(hour):
    """Email each team whose month-to-date spend crossed 50, 80 or 100 % of its
    budget, once per threshold and month (the BudgetAlert unique key)."""
    start = month_start(hour)
    spends = queries.spend_by_team(start, hour + HOUR)
    for budget in Budget.objects.filter(team_id__in=spends).select_related("team"):
        spend = spends[budget.team_id]
        for percent in BUDGET_THRESHOLDS:
            if spend * 100 < budget.monthly_amount * percent:
                break
            alert, created = BudgetAlert.objects.get_or_create(
                team=budget.team,
                month=start.date(),
                percent=percent,
                defaults={"spend": spend.quantize(Decimal("0.01"))},
            )
            if created:
                transaction.on_commit(lambda alert_id=alert.pk: send_budget_alert(alert_id))


def send_budget_alert(alert_id):
    alert = BudgetAlert.objects.select_related("team", "team__budget").get(pk=alert_id)
    team = alert.team
    recipients = sorted(
        team.memberships.exclude(user__email="").values_list("user__email", flat=True)
    )
    if not recipients:
        return
    currency = settings.PORTAL_CURRENCY
    subject = f"[GPU portal] {team.name} has spent {alert.percent} % of its GPU budget"
    body = (
        f"{team.name} has spent {alert.spend} {currency} on GPUs this month, "
        f"{alert.percent} % of its budget of {team.budget.monthly_amount} {currency}.\n\n"
        f"See where it goes: {settings.PORTAL_BASE_URL}/billing/teams/{team.slug}/\n"
    )
    try:
        send_mail(one_line(subject), body, settings.DEFAULT_FROM_EMAIL, recipients)
    except Exception:  # the alert row stays; a mail outage must not undo ingestion
        log.exception("budget alert %s could not be sent", alert_id)
