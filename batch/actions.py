"""Every change of a batch window or job goes through these functions.

Job transitions go through `batch.jobs` (a compare-and-set on the status and
one event in the job's history each), atomic, with side effects (planning,
the cluster) queued on commit. Views, the API, the admin and the tasks call
these.
"""

import logging
import time
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from django.utils.module_loading import import_string

from batch import emails, jobs, launch, manifests, occurrences, planner, validation
from batch.models import (
    BatchJob,
    BatchWindow,
    ImageRule,
    PlannerState,
    TeamShare,
    WindowCapacity,
)
from cluster import clock
from cluster.capacity import capacities_where, capacity_of, capacity_where
from cluster.models import Flavor
from gpu_requests import capacity as quota_capacity
from teams import access, hooks
from teams.errors import NotAllowed
from teams.formats import money

log = logging.getLogger(__name__)

Status = BatchJob.Status
Action = jobs.Action
CENT = Decimal("0.01")
MAX_COST = Decimal(10) ** 12


def horizon():
    return timedelta(days=settings.PORTAL_BATCH_HORIZON_DAYS)


# --- windows ---


def windows_with_occurrences(starts_at, ends_at, *, enabled_only=True):
    """[(window, occurrences, {flavor id: GPUs})] meeting [starts_at, ends_at). Two queries."""
    windows = BatchWindow.objects.prefetch_related("capacities")
    if enabled_only:
        windows = windows.filter(enabled=True)
    return [
        (
            window,
            window.occurrences(starts_at, ends_at),
            {c.flavor_id: c.gpus for c in window.capacities.all()},
        )
        for window in windows
    ]


def batch_reservations(flavor_ids, starts_at, ends_at, *, exclude_window=None):
    """Window occurrences as reservations of their flavors' capacity, like approved quota.

    Registered with gpu_requests.capacity, so approvals and the review queue count
    them. An open-ended period is looked at up to the capacity horizon. One query:
    the enabled windows' capacities of those flavors, with their windows (a window
    with none of them is not read, nor are its occurrences worked out).
    """
    ends_at = ends_at or quota_capacity.horizon(flavor_ids, starts_at)
    capacities = (
        WindowCapacity.objects.filter(flavor_id__in=flavor_ids, window__enabled=True)
        .select_related("window")
        .order_by("window_id", "flavor__name")
    )
    if exclude_window is not None:
        capacities = capacities.exclude(window_id=exclude_window.pk)
    held, found = [], {}
    for capacity in capacities:
        window = capacity.window
        if window.pk not in found:
            found[window.pk] = window.occurrences(starts_at, ends_at)
        held.extend(
            quota_capacity.Reservation(
                window.pk,
                capacity.flavor_id,
                None,
                o.opens_at,
                o.closes_at,
                capacity.gpus,
                WINDOW_SOURCE,
                window.name,
            )
            for o in found[window.pk]
        )
    return held


WINDOW_SOURCE = "batch window"


def hostable_capacity(flavor, *, spot_allowed):
    """GPUs of `flavor` that a window's jobs can be placed on: its capacity less the
    devices on nodes they are kept off (spot nodes, when the window does not allow
    spot: the rule the Job's affinity writes, `manifests.may_run_on`). Two queries
    when spot is not allowed, none when it is."""
    if spot_allowed:
        return capacity_of(flavor)
    return capacity_where(flavor, _off_spot)


def _off_spot(labels):
    """A node a job of a window without spot may land on."""
    spot_label = settings.PORTAL_BATCH_SPOT_LABEL
    return manifests.may_run_on(labels, spot_allowed=False, spot_label=spot_label)


def usable_capacities(windows):
    """{flavor id: GPUs} the windows without spot among `windows` ([(window,
    occurrences, capacity)]) can use of each of their flavors now (`hostable_capacity`,
    for all at once): the inventory may have changed since they were saved. Two
    queries, none when every window allows spot."""
    flavor_ids = {f for window, _, capacity in windows if not window.spot_allowed for f in capacity}
    return capacities_where(flavor_ids, _off_spot) if flavor_ids else {}


def _refuse_capacity(message):
    raise ValidationError({"capacity": [message]})


def check_capacity(
    window_name, rule, capacity, *, spot_allowed, enabled=True, exclude_window=None, now=None
):
    """Refuse batch capacity larger than its flavor, or than the GPUs its jobs can be
    placed on (a window without spot on a flavor whose nodes are spot can never run:
    refused, as is setting aside more than the flavor's other nodes hold), and, for an
    enabled window, capacity that at the busiest instant of an occurrence would exceed
    the flavor's capacity minus approved/active quota and the other windows' batch
    capacity. The occurrences are looked at as far ahead as approvals see them
    (gpu_requests.capacity.horizon), so the two checks agree. The one check of a
    window's capacity: the API (through `save_window`) and the admin's form call it.
    Four queries, and two per flavor without spot."""
    for flavor, gpus in sorted(capacity.items(), key=lambda item: item[0].name):
        total = capacity_of(flavor)
        if gpus > total:
            _refuse_capacity(
                f"{flavor.name}: {window_name} would set {gpus} GPUs aside, but the "
                f"flavor has {total}."
            )
        hostable = hostable_capacity(flavor, spot_allowed=spot_allowed)
        spot = settings.PORTAL_BATCH_SPOT_LABEL
        if hostable == 0:
            _refuse_capacity(
                f"{flavor.name}: no node can run {window_name}'s jobs: the flavor's "
                f"{total} GPUs are all on spot nodes ({spot}) and the window does not allow "
                "spot. Allow spot, or set none of this flavor aside."
            )
        if gpus > hostable:
            _refuse_capacity(
                f"{flavor.name}: {window_name} would set {gpus} GPUs aside, but only "
                f"{hostable} of the flavor's {total} are on nodes its jobs can use (the "
                f"others are spot nodes, {spot}, and the window does not allow spot), so "
                f"at most {hostable} can be."
            )
    if not enabled or not capacity:
        return
    now = now or clock.now()
    flavor_ids = {flavor.pk for flavor in capacity}
    ends_at = quota_capacity.horizon(flavor_ids, now)
    found = rule.between(now, ends_at)
    if not found:
        return
    by_flavor = defaultdict(list)
    for held in quota_capacity.reservations(flavor_ids, now, ends_at):
        by_flavor[held.flavor_id].append(held)
    for held in batch_reservations(flavor_ids, now, ends_at, exclude_window=exclude_window):
        by_flavor[held.flavor_id].append(held)
    for flavor, gpus in sorted(capacity.items(), key=lambda item: item[0].name):
        total = capacity_of(flavor)
        timeline = quota_capacity.Timeline(by_flavor[flavor.pk])  # one sort, then bisections
        for occurrence in found:
            busiest = timeline.peak(occurrence.opens_at, occurrence.closes_at)
            if busiest + gpus > total:
                when = occurrences.label(occurrence, rule.timezone)
                raise ValidationError(
                    {
                        "capacity": [
                            f"{flavor.name}: {window_name} on {when} would set {gpus} GPUs aside, "
                            f"but {busiest} of the flavor's {total} are already reserved (quota "
                            f"and other windows) at the busiest moment, so at most "
                            f"{max(total - busiest, 0)} can be."
                        ]
                    }
                )


@transaction.atomic
def save_window(window, *, by, capacity, **fields):
    """Create (window None) or update a window and its per-flavor capacity.

    `capacity` is {Flavor: GPUs}. Flavors are locked in id order, as quota
    approvals lock them, so an approval and a window change of one flavor
    cannot both pass the check on stale figures.
    """
    if not access.can_review(by):
        raise NotAllowed("Only platform admins can change batch windows.")
    list(Flavor.objects.select_for_update().filter(pk__in=[f.pk for f in capacity]).order_by("pk"))
    rule = occurrences.WeeklyRule(
        timezone=fields["timezone"],
        days=tuple(fields["days"]),
        start=fields["start_time"],
        end=fields["end_time"],
        end_day=fields.get("end_day") or None,
        exceptions=frozenset(fields.get("exceptions") or ()),
    )
    check_capacity(
        fields["name"],
        rule,
        capacity,
        # A partial update keeps the window's own setting.
        spot_allowed=fields.get(
            "spot_allowed", window.spot_allowed if window is not None else False
        ),
        enabled=fields.get("enabled", True),
        exclude_window=window,
    )
    if window is None:
        window = BatchWindow.objects.create(**fields)
    else:
        for name, value in fields.items():
            setattr(window, name, value)
        window.save()
        window.__dict__.pop("rule", None)
        window.capacities.exclude(flavor__in=list(capacity)).delete()
    for flavor, gpus in capacity.items():
        WindowCapacity.objects.update_or_create(
            window=window, flavor=flavor, defaults={"gpus": gpus}
        )
    transaction.on_commit(lambda: request_plan("window changed"))
    return window


# --- costs ---


def estimate(*, flavor, gpus, parallelism, expected_runtime_minutes, price_factor, spot):
    """(off-peak estimate, on-demand cost): GPUs x pods x hours x price x factors, to the cent."""
    hours = Decimal(expected_runtime_minutes) / Decimal(60)
    on_demand = Decimal(gpus * parallelism) * hours * flavor.price_per_gpu_hour
    factor = price_factor * (settings.PORTAL_BATCH_SPOT_FACTOR if spot else Decimal(1))
    return (
        (on_demand * factor).quantize(CENT, ROUND_HALF_UP),
        on_demand.quantize(CENT, ROUND_HALF_UP),
    )


def estimate_for(data, windows):
    """The estimate before planning: at the dearest window that could take the job."""
    flavor = data["flavor"]
    fitting = [w for w, _, cap in windows if cap.get(flavor.pk)]
    if data.get("window") is not None:
        fitting = [w for w in fitting if w.pk == data["window"].pk]
    if not fitting:
        return None
    window = max(fitting, key=lambda w: (w.price_factor, not w.spot_allowed, w.pk))
    return estimate(
        flavor=flavor,
        gpus=data["gpus"],
        parallelism=data.get("parallelism", 1),
        expected_runtime_minutes=data["expected_runtime_minutes"],
        price_factor=window.price_factor,
        spot=data.get("spot_allowed", False) and window.spot_allowed,
    )


# --- jobs ---


def can_cancel(user, job):
    """Its submitter, the team's managers and platform admins."""
    return job.created_by_id == user.pk or access.can_manage(user, job.team)


def validate_job(data, *, by, now=None):
    """{field: [message]} for a new job, as the API and the form show them."""
    now = now or clock.now()
    errors = {}
    team = data.get("team")
    if team is not None and not access.can_see(by, team):
        errors["team"] = ["You are not a member of this team."]
    elif team is not None and team.is_archived:
        errors["team"] = [f"{team.name} is archived and takes no new work."]
    prefixes = list(ImageRule.objects.values_list("prefix", flat=True))
    windows = windows_with_occurrences(now, now + horizon())
    flavor = data.get("flavor")
    usable = None
    if isinstance(flavor, Flavor) and not data.get("spot_allowed"):
        usable = hostable_capacity(flavor, spot_allowed=False)  # two queries
    errors |= validation.job_errors(
        data, prefixes=prefixes, windows=windows, usable_without_spot=usable
    )
    return errors, windows


JOB_FIELDS = (
    "name",
    "image",
    "command",
    "args",
    "env",
    "gpus",
    "parallelism",
    "completions",
    "expected_runtime_minutes",
    "max_runtime_minutes",
    "spot_allowed",
    "priority",
    "annotations",
)


@transaction.atomic
def submit(*, by, team, flavor, window=None, occurrence=None, **fields):
    data = {"team": team, "flavor": flavor, "window": window, "occurrence": occurrence, **fields}
    errors, windows = validate_job(data, by=by)
    if errors:
        raise ValidationError(errors)
    cost, on_demand = estimate_for(data, windows)
    if on_demand >= MAX_COST:
        raise ValidationError({"gpus": ["The estimated cost is too large; ask for less."]})
    job = BatchJob.objects.create(
        team=team,
        flavor=flavor,
        target_window=window,
        target_opens_at=occurrence,
        created_by=by,
        estimated_cost=cost,
        on_demand_cost=on_demand,
        explanation="Waiting for the planner.",
        **{name: fields[name] for name in JOB_FIELDS if name in fields},
    )
    jobs.record(job, action=Action.SUBMIT, from_status="", to_status=Status.QUEUED, actor=by)
    transaction.on_commit(lambda: request_plan("job submitted"))
    return job


CANCELLABLE = (*BatchJob.PLANNABLE, *BatchJob.HOLDING)


@transaction.atomic
def cancel(job, *, by, reason=""):
    """Cancel a waiting or running job. On the cluster, its Job is deleted (the sync)
    and the GPU-time it held so far is recorded as used, as when a job finishes."""
    if not can_cancel(by, job):
        raise NotAllowed("Only the submitter, a team manager or an admin can cancel this job.")
    job.refresh_from_db(fields=["status", "started_at", "released_at"])
    running = _cancel(job, by=by, reason=reason, now=clock.now())
    launch.changed([job.pk])
    if running:
        hooks.quota_changed(job.team_id)  # its batch allotment ends with it
    transaction.on_commit(lambda: request_plan("job cancelled"))
    return job


def _cancel(job, *, by, reason, now):
    """The cancel itself, from the status the caller read (`job.status`): the one
    compare-and-set, and the GPU-time a released or running job held so far recorded
    as used. True if it was on the cluster (its Job must go, its allotment ends)."""
    fields = {"finished_at": now}
    running = job.status in BatchJob.HOLDING
    if running:
        started = job.started_at or job.released_at or now
        fields["used_gpu_seconds"] = used_gpu_seconds(job, started, now)
    jobs.move_or_refuse(
        job,
        to=Status.CANCELLED,
        # The status just read: a job that moved meanwhile is refused, not mis-charged.
        allowed_from=[job.status] if job.status in CANCELLABLE else list(CANCELLABLE),
        action=Action.CANCEL,
        actor=by,
        reason=reason,
        **fields,
    )
    return running


def team_archived(team, *, by, reason):
    """An archived team's batch work ends with it (`teams.actions.archive_team`'s hook,
    in its transaction): its queued and planned jobs are cancelled, and its released
    and running ones stopped through the same cancel (their Jobs deleted by the sync,
    the GPU-time so far charged), each with the archiving's reason in its history.
    The plan is made again right here, so the capacity they held in their
    occurrences goes to other teams' work as the archiving commits, not at a later
    tick. A planner run's worth of queries when the team had work planned or
    running, a few when it had none."""
    # The planner's lock first, then the jobs' rows: the order planner runs take
    # them in, so a run waiting here cannot hold a row this needs.
    PlannerState.locked()
    team_jobs = list(
        BatchJob.objects.select_for_update()
        .filter(team_id=team.pk, status__in=CANCELLABLE)
        .order_by("pk")
    )
    if not team_jobs:
        return
    now = clock.now()
    why = f"{team.name} was archived: {reason}" if reason else f"{team.name} was archived."
    held_capacity = False
    for job in team_jobs:
        held_capacity |= job.status != Status.QUEUED  # planned, released or running
        _cancel(job, by=by, reason=why, now=now)
    # Planned Jobs (suspended) and running ones are deleted from the team's namespace;
    # the allotment of the running ones goes with the team's quota (archive_team).
    launch.changed([job.pk for job in team_jobs])
    if held_capacity:
        replan(reason="team archived", now=now)


@transaction.atomic
def release_past_budget(job, *, by, reason=""):
    """Let one held job run past its team's hard budget: platform admins, audited."""
    if not access.can_review(by):
        raise NotAllowed("Only platform admins can release a job past its team's budget.")
    jobs.release_past_budget(job, actor=by, reason=reason or "Released past the team's budget.")
    transaction.on_commit(lambda: request_plan("job released past its budget"))
    return job


def used_gpu_seconds(job, started, now):
    """GPU-seconds a job held from `started` to `now`: every pod's GPUs."""
    return max(int((now - started).total_seconds()), 0) * job.total_gpus


def actual(job, now):
    """What a job that ran cost and how long it ran (so far, while it runs), or None.

    Its GPU-hours at the flavor's price with the factors of its window, as its
    estimate was priced; no query (the window comes with the job)."""
    runtime = job.runtime(now)
    if runtime is None or job.status in BatchJob.PLANNABLE:
        return None  # never started, or back in the queue after a reclaim
    if job.is_finished:
        gpu_seconds = job.used_gpu_seconds
    else:
        gpu_seconds = used_gpu_seconds(job, job.started_at, now)
    gpu_hours = Decimal(gpu_seconds) / Decimal(3600)
    price = job.flavor.price_per_gpu_hour * job.price_factor
    cost = (gpu_hours * price).quantize(CENT, ROUND_HALF_UP)
    return {"runtime": runtime, "gpu_hours": gpu_hours, "cost": cost}


# --- planning ---


# The planner's task, named by its path as the outbox names its tasks: batch.tasks
# sits above this module (its task calls replan) and is imported when queueing.
PLAN_TASK = "batch.tasks.plan"


def request_plan(reason):
    """Mark the plan stale and queue a planner run; the beat tick runs it if the queue is down."""
    PlannerState.objects.get_or_create(pk=1)
    PlannerState.objects.filter(pk=1).update(dirty=True)
    plan_task = import_string(PLAN_TASK)  # outside the try: a bad path is no broker outage
    try:
        plan_task.apply_async((reason,), retry=False)
    except Exception as exc:  # the broker's errors vary by transport
        log.warning("could not queue a planner run (the tick will): %s", exc)


def window_slots(windows, usable):
    """A slot per occurrence and flavor; a window without spot counts only the GPUs
    its jobs can land on now (`usable`, from `usable_capacities`), and a flavor of
    which it can use none gives no slot: a job planned there would never start."""
    slots = []
    for window, found, capacity in windows:
        if not window.spot_allowed:
            capacity = {f: min(gpus, usable.get(f, gpus)) for f, gpus in capacity.items()}
        for occurrence in found:
            label = f"{window.name}, {occurrences.label(occurrence, window.timezone)}"
            slots.extend(
                planner.Slot(
                    window.pk, flavor_id, occurrence.opens_at, occurrence.closes_at, gpus, label
                )
                for flavor_id, gpus in capacity.items()
                if gpus
            )
    return slots


def _holds(now):
    """Capacity taken in occurrences not yet closed: released, running and finished jobs."""
    rows = BatchJob.objects.filter(closes_at__gt=now, planned_start__isnull=False).exclude(
        status__in=[*BatchJob.PLANNABLE, Status.CANCELLED, Status.PREEMPTED]
    )
    fields = ("window_id", "flavor_id", "opens_at", "planned_start", "planned_end", "finished_at")
    holds = []
    for *key, start, end, finished, gpus, parallelism, team_id in rows.values_list(
        *fields, "gpus", "parallelism", "team_id"
    ):
        ends_at = min(end, finished) if finished else end
        holds.append(planner.Hold(*key, start, ends_at, gpus * parallelism, team_id))
    return holds


def recent_usage(now):
    """{team id: GPU-hours of batch work that ended in the lookback period}. One query."""
    since = now - timedelta(days=settings.PORTAL_BATCH_USAGE_DAYS)
    rows = (
        BatchJob.objects.filter(finished_at__gte=since)
        .values("team_id")
        .annotate(seconds=Sum("used_gpu_seconds"))
        .values_list("team_id", "seconds")
    )
    return {team_id: seconds / 3600 for team_id, seconds in rows if seconds}


def plan_inputs(now, state):
    """What a planner run needs at `now` with the carried counters of `state`
    (PlannerState): (windows with occurrences, {job id: waiting BatchJob},
    keyword arguments of planner.plan, {job id: why a budget holds it}). A query
    or so per kind of input."""
    windows = windows_with_occurrences(now, now + horizon())
    rows = {job.pk: job for job in BatchJob.objects.waiting().select_related("flavor", "team")}
    held = held_by_budget(rows.values(), now)
    to_plan = [planner_job(job) for job in rows.values() if job.pk not in held]
    weights = {t: float(w) for t, w in TeamShare.objects.values_list("team_id", "weight")}
    # Occurrences opening within the lead time are counted for no-starvation
    # for good: the run at the lead time plans the Jobs it creates suspended.
    inputs = {
        "slots": window_slots(windows, usable_capacities(windows)),
        "jobs": to_plan,
        "now": now,
        "holds": _holds(now),
        "weights": weights,
        "recent_usage": recent_usage(now),
        "waiting": load_waiting(state.waiting),
        "settle_until": now + timedelta(seconds=settings.PORTAL_BATCH_PLAN_LEAD),
    }
    return windows, rows, inputs, held


# Plan.unplaced's code for a job a budget holds (the planner never sees it).
HELD_BY_BUDGET = "held_by_budget"


def held_by_budget(waiting, now):
    """{job id: reason} of the `waiting` jobs that a hard budget holds. Per team, in
    the planner's order (higher priority, then the oldest), what each may cost at
    most (its maximum runtime: `BatchJob.cost_bound`) adds up against what the team
    has left this month; a job that would take it past is held and takes nothing, so
    a smaller one after it may still fit. A job an admin released past the budget is
    never held, and counts."""
    waiting = list(waiting)
    left = hooks.budget_left({job.team_id for job in waiting}, now)
    held = {}
    committed = defaultdict(Decimal)
    for job in sorted(waiting, key=lambda j: (j.team_id, -j.priority, j.created_at, j.pk)):
        if job.team_id not in left:
            continue
        total = committed[job.team_id] + job.cost_bound
        if total > left[job.team_id] and not job.budget_override:
            ahead = committed[job.team_id]
            ahead = f"; the team's jobs ahead of it take {money(ahead)}" if ahead else ""
            held[job.pk] = (
                f"Held by {job.team.name}'s budget: its cost at its maximum runtime of "
                f"{job.max_runtime_minutes} min ({money(job.cost_bound)}) would take the team "
                f"past it ({money(max(left[job.team_id], 0))} left this month{ahead}). "
                "A platform admin can release it past the budget."
            )
            continue
        committed[job.team_id] = total
    return held


@transaction.atomic
def stop_for_budget(team_id, *, reason, now=None):
    """The team's released and running batch jobs stopped, as its spent hard budget's
    rule says (registered with hooks.on_budget_spent): each cancelled with `reason`
    in its history and the GPU time it held so far recorded, its Job deleted (the
    sync), its submitter told. A job an admin released past the budget runs on.
    Returns what was stopped, in words."""
    now = now or clock.now()
    running = list(
        BatchJob.objects.select_for_update(of=("self",))
        .filter(team_id=team_id, status__in=BatchJob.HOLDING, budget_override=False)
        .select_related("flavor")
        .order_by("pk")
    )
    stopped = []
    for job in running:
        started = job.started_at or job.released_at or now
        if jobs.move(
            job,
            to=Status.CANCELLED,
            allowed_from=[job.status],
            action=Action.BUDGET_STOP,
            reason=reason,
            finished_at=now,
            used_gpu_seconds=used_gpu_seconds(job, started, now),
        ):
            stopped.append(job)
    if not stopped:
        return []
    ids = [job.pk for job in stopped]
    launch.changed(ids)
    hooks.quota_changed(team_id)  # their batch allotment ends with them
    for job_id in ids:
        transaction.on_commit(lambda job_id=job_id: emails.send_finished(job_id), robust=True)
    transaction.on_commit(lambda: request_plan("jobs stopped: budget spent"))
    return [
        f"batch job #{job.pk} “{job.name}” ({job.total_gpus} x {job.flavor.name})"
        for job in stopped
    ]


def planner_job(job, **changes):
    """A BatchJob as the planner sees it; `changes` are BatchJob fields to vary."""
    fields = {
        "gpus": job.gpus,
        "parallelism": job.parallelism,
        "max_runtime_minutes": job.max_runtime_minutes,
        "flavor_id": job.flavor_id,
    } | changes
    return planner.Job(
        id=job.pk,
        team_id=job.team_id,
        flavor_id=fields["flavor_id"],
        gpus=fields["gpus"] * fields["parallelism"],
        runtime=timedelta(minutes=fields["max_runtime_minutes"]),
        priority=job.priority,
        submitted_at=job.created_at,
        target_window_id=job.target_window_id,
        target_opens_at=job.target_opens_at,
    )


def replan(*, reason="", now=None):
    """Plan every queued and planned job again and apply what changed. Returns the Plan.

    Runs hold the planner's lock, so they queue up rather than interleave. A
    query or two per job whose plan changed, a handful for the rest.
    """
    now = now or clock.now()
    with transaction.atomic():
        state = PlannerState.locked()
        started = time.perf_counter()
        windows, rows, inputs, held = plan_inputs(now, state)
        result = planner.plan(**inputs)
        for job_id, reason in held.items():
            result.reasons[job_id] = [reason]
            result.unplaced[job_id] = HELD_BY_BUDGET
        factors = {w.pk: w for w, _, _ in windows}
        planned_in = {
            job.pk: (job.window_id, job.opens_at)
            for job in rows.values()
            if job.status == Status.PLANNED
        }
        changed = [job_id for job_id in sorted(rows) if _apply(rows[job_id], result, factors, now)]
        # Their submitters hear of jobs taken out of the occurrence they had.
        moved = {
            job_id: _occurrence_words(factors.get(planned_in[job_id][0]), planned_in[job_id][1])
            for job_id in changed
            if job_id in planned_in
            and (rows[job_id].window_id, rows[job_id].opens_at) != planned_in[job_id]
        }
        if moved:
            transaction.on_commit(lambda: emails.send_moved(moved), robust=True)
        # The planned Jobs are created (suspended) or relabelled on the cluster; their
        # teams' namespaces are made sure of first.
        hooks.quota_changed_many({rows[job_id].team_id for job_id in changed})
        launch.changed(changed)
        state.dirty = False
        state.waiting = dump_waiting(result.waiting)
        state.last_run_at = now
        state.last_reason = reason[:100]
        state.last_jobs = len(rows)
        state.last_seconds = time.perf_counter() - started
        state.save()
    log.info("planned %d jobs (%d changed): %s", len(rows), len(changed), reason)
    return result


def _occurrence_words(window, opens_at):
    if window is None:
        return f"the occurrence opening {opens_at:%a %d %b %H:%M} UTC"
    local = opens_at.astimezone(occurrences.zone(window.timezone))
    return f"{window.name}, {local:%a %d %b %H:%M} {window.timezone}"


def load_waiting(stored):
    """PlannerState.waiting (JSON) as the planner's {flavor id: Waiting}."""
    return {
        int(flavor_id): planner.Waiting(
            (datetime.fromisoformat(entry["through"][0]), entry["through"][1]),
            {int(team): n for team, n in entry["before"].items()},
            {int(team): n for team, n in entry["after"].items()},
        )
        for flavor_id, entry in stored.items()
    }


def dump_waiting(waiting):
    return {
        str(flavor_id): {
            "through": [counters.through[0].isoformat(), counters.through[1]],
            "before": {str(team): n for team, n in counters.before.items()},
            "after": {str(team): n for team, n in counters.after.items()},
        }
        for flavor_id, counters in waiting.items()
        if counters.through is not None
    }


def _apply(job, result, windows, now):
    """Write one job's new plan if it changed; True if it did."""
    explanation = result.explanation(job.pk) or "Waiting for a window."
    placement = result.placements.get(job.pk)
    if placement is None:
        if job.status == Status.PLANNED:
            jobs.move_or_refuse(
                job,
                to=Status.QUEUED,
                allowed_from=[Status.PLANNED],
                action=Action.UNPLAN,
                reason=f"Plan revised. {explanation}",
                explanation=explanation,
                window=None,
                opens_at=None,
                closes_at=None,
                planned_start=None,
                planned_end=None,
            )
            return True
        if job.explanation != explanation:
            BatchJob.objects.filter(pk=job.pk, status=Status.QUEUED).update(explanation=explanation)
        return False
    slot = placement.slot
    window = windows[slot.window_id]
    cost, _ = estimate(
        flavor=job.flavor,
        gpus=job.gpus,
        parallelism=job.parallelism,
        expected_runtime_minutes=job.expected_runtime_minutes,
        price_factor=window.price_factor,
        spot=job.spot_allowed and window.spot_allowed,
    )
    fields = {
        "window_id": slot.window_id,
        "opens_at": slot.opens_at,
        "closes_at": slot.closes_at,
        "planned_start": placement.starts_at,
        "planned_end": placement.ends_at,
        "explanation": explanation,
        "estimated_cost": cost,
    }
    if job.first_eta is None:
        fields["first_eta"] = placement.starts_at
    same_occurrence = (job.window_id, job.opens_at) == (slot.window_id, slot.opens_at)
    # A job already due in its open occurrence stays as planned (the tick releases
    # it): planning from "now" would otherwise move its start at every run.
    due_now = job.planned_start is not None and job.planned_start <= now
    same = same_occurrence and (
        job.planned_start == placement.starts_at or (due_now and placement.starts_at <= now)
    )
    if job.status == Status.PLANNED and same:
        if job.explanation != explanation:
            BatchJob.objects.filter(pk=job.pk, status=Status.PLANNED).update(
                explanation=explanation
            )
        return False
    jobs.move_or_refuse(
        job,
        to=Status.PLANNED,
        allowed_from=[job.status],
        action=Action.PLAN if job.status == Status.QUEUED else Action.REPLAN,
        reason=explanation,
        **fields,
    )
    return True


def plan_due(now):
    """True if the plan is stale, or an occurrence entered its lead time since the last run."""
    state = PlannerState.objects.filter(pk=1).first()
    if state is None or state.dirty or state.last_run_at is None:
        return True
    lead = timedelta(seconds=settings.PORTAL_BATCH_PLAN_LEAD)
    for _, found, _ in windows_with_occurrences(now, now + lead):
        for occurrence in found:
            if state.last_run_at < occurrence.opens_at - lead:
                return True
    return False


def tick(now=None):
    """The beat's periodic work: plan when due. Returns what it did, for the logs."""
    now = now or clock.now()
    done = {"planned": False}
    if plan_due(now):
        replan(reason="tick", now=now)
        done["planned"] = True
    done["released"] = len(launch.release_due(now))
    done["resent"] = len(launch.job_sync.sweep())
    return done
