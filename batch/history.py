"""A month of batch history made up: jobs arriving in a pattern, run through the
planner as the portal runs them, written as finished jobs. The demo's month
(`seed_batch`) and the held-out month the start estimates are tested on.

The run imitates the portal's loop on plain data: a planner run at each
submission, at each finish and when an occurrence enters the lead time; a job
released at the first tick after its planned start, its pods running some
seconds later, ending after a share of its expected runtime (at most its
deadline). What the planner first said of each job is kept (`first_eta`), as
`batch.actions` keeps it.
"""

import heapq
import math
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from batch import actions, planner
from batch.models import BatchJob
from cluster.models import Flavor

# How the jobs of a week arrive, per pattern: (share of the week's jobs, weekdays
# (0 = Monday), first and last UTC hour of arrival). The demo's teams submit
# through the working day, a little at weekends; the held-out patterns send most
# of a week's work in a burst on Monday morning, or all of it in the evenings (the
# calibration, batch.eta.MARGIN, was chosen before that one was first replayed).
PATTERNS = {
    "demo": [(0.92, range(5), (8, 19)), (0.08, range(5, 7), (10, 18))],
    "monday-bursts": [(0.7, (0,), (8, 10)), (0.3, range(1, 5), (8, 19))],
    "evenings": [(1.0, range(7), (17, 23))],
}
# GPU-hours offered per GPU-hour of window capacity, at the jobs' maximum runtimes:
# busy enough that work waits for later occurrences now and then.
LOAD = 0.85
STARTUP_SECONDS = (3, 60)  # release to pods running
SHAPES = [(1, 1), (1, 1), (1, 2), (2, 1), (2, 1), (4, 1)]  # (GPUs per pod, pods)
IMAGE = "docker.io/library/python:3.12-slim"
PREFIX = "history-"  # of the made-up jobs' names


@dataclass(frozen=True)
class Arrival:
    id: int
    team_id: int
    flavor_id: int
    gpus: int  # per pod
    parallelism: int
    expected_minutes: int
    max_minutes: int
    priority: int
    submitted_at: object  # datetime
    runs_for: float  # seconds it would run, if its deadline lets it


@dataclass
class Ran:
    """What became of an arrival: the fields its BatchJob row is written with."""

    arrival: Arrival
    first_eta: object = None
    placement: object = None  # planner.Placement it was released with
    released_at: object = None
    started_at: object = None
    finished_at: object = None
    deadline_seconds: int = 0


def arrivals(pattern, slots, team_ids, start, days, *, seed=1):
    """The month's arrivals in `pattern`, sized to LOAD of the `slots`' capacity."""
    rng = random.Random(seed)
    by_flavor = {}  # flavor id -> (longest occurrence, GPU-seconds, most GPUs)
    for slot in slots:
        seconds = (slot.closes_at - slot.opens_at).total_seconds()
        longest, gpu_seconds, most = by_flavor.get(slot.flavor_id, (0, 0, 0))
        by_flavor[slot.flavor_id] = (
            max(longest, seconds),
            gpu_seconds + slot.capacity * seconds,
            max(most, slot.capacity),
        )
    found = []
    for flavor_id, (longest, gpu_seconds, most) in sorted(by_flavor.items()):
        shapes = [shape for shape in SHAPES if shape[0] * shape[1] <= most]
        offered = 0.0
        while offered < LOAD * gpu_seconds:
            gpus, pods = rng.choice(shapes)
            # Up to half the longest occurrence, at most; most much shorter.
            expected = max(1, int(longest / 60 * rng.choice([0.05, 0.1, 0.15, 0.25, 0.35])))
            maximum = max(expected, math.ceil(expected * 1.5))
            offered += gpus * pods * maximum * 60
            found.append(
                Arrival(
                    0,
                    rng.choice(team_ids),
                    flavor_id,
                    gpus,
                    pods,
                    expected,
                    maximum,
                    rng.choice([0, 0, 0, 5]),
                    _moment(rng, PATTERNS[pattern], start, days),
                    expected * 60 * rng.uniform(0.6, 1.1),
                )
            )
    found.sort(key=lambda a: a.submitted_at)
    return [replace(a, id=index) for index, a in enumerate(found, 1)]


def _moment(rng, pattern, start, days):
    weeks = max(days // 7, 1)
    share, weekdays, (first, last) = rng.choices(pattern, weights=[p[0] for p in pattern])[0]
    week = rng.randrange(weeks)
    day = start + timedelta(days=7 * week)
    day += timedelta(days=(rng.choice(list(weekdays)) - day.weekday()) % 7)
    return day.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(
        seconds=rng.uniform(first * 3600, (last + 1) * 3600)
    )


def run(slots, month, *, seed=1, weights=None):
    """Each arrival run through the planner; {arrival id: Ran}."""
    rng = random.Random(seed)
    tick = settings.PORTAL_BATCH_TICK_INTERVAL
    lead = timedelta(seconds=settings.PORTAL_BATCH_PLAN_LEAD)
    horizon = actions.horizon()
    usage_days = timedelta(days=settings.PORTAL_BATCH_USAGE_DAYS)
    slots = sorted(slots, key=lambda s: s.opens_at)
    ran = {a.id: Ran(a) for a in month}
    events = [(a.submitted_at, 0, a.id) for a in month]
    events += [(slot.opens_at - lead, 2, 0) for slot in slots]  # the tick's replan
    heapq.heapify(events)
    waiting, holds, finished = {}, {}, []
    counters, plan = {}, planner.Plan()

    def replan(now):
        nonlocal counters, plan
        since = now - usage_days
        usage = {}
        for at, team_id, gpu_seconds in finished:
            if since <= at < now:
                usage[team_id] = usage.get(team_id, 0) + gpu_seconds / 3600
        plan = planner.plan(
            [s for s in slots if s.closes_at > now and s.opens_at < now + horizon],
            list(waiting.values()),
            now=now,
            holds=list(holds.values()),
            weights=weights,
            recent_usage=usage,
            waiting=counters,
            settle_until=now + lead,
        )
        counters = plan.waiting
        for job_id, placement in plan.placements.items():
            if ran[job_id].first_eta is None:
                ran[job_id].first_eta = placement.starts_at

    while events or waiting:
        due = [p for i, p in plan.placements.items() if i in waiting]
        release_at = min((p.starts_at for p in due), default=None)
        if release_at is not None:
            # The first tick at or after the planned start.
            release_at = datetime.fromtimestamp(
                math.ceil(release_at.timestamp() / tick) * tick, UTC
            )
        if events and (release_at is None or events[0][0] < release_at):
            now, kind, job_id = heapq.heappop(events)
            if kind == 0:
                arrival = ran[job_id].arrival
                waiting[job_id] = planner.Job(
                    arrival.id,
                    arrival.team_id,
                    arrival.flavor_id,
                    arrival.gpus * arrival.parallelism,
                    timedelta(minutes=arrival.max_minutes),
                    arrival.priority,
                    arrival.submitted_at,
                )
            elif kind == 1:
                done = ran[job_id]
                job = done.arrival
                holds[job_id] = replace(holds[job_id], ends_at=now)
                used = (now - done.started_at).total_seconds() * job.gpus * job.parallelism
                finished.append((now, job.team_id, used))
            if kind != 2 or waiting:
                replan(now)
            continue
        if release_at is None:
            break  # nothing planned: the rest never fits
        now = release_at
        for placement in due:
            if placement.starts_at > now:
                continue
            job = waiting.pop(placement.job_id)
            done = ran[job.id]
            slot = placement.slot
            done.placement, done.released_at = placement, now
            holds[job.id] = planner.Hold(
                *slot.key, placement.starts_at, placement.ends_at, job.gpus, job.team_id
            )
            done.deadline_seconds = int(
                min(job.runtime.total_seconds(), (slot.closes_at - now).total_seconds())
            )
            done.started_at = now + timedelta(seconds=rng.uniform(*STARTUP_SECONDS))
            runs = min(done.arrival.runs_for, done.deadline_seconds)
            done.finished_at = done.started_at + timedelta(seconds=runs)
            heapq.heappush(events, (done.finished_at, 1, job.id))
    return ran


@transaction.atomic
def write(ran, *, flavors, members, until):
    """The run's jobs that ended by `until`, as finished BatchJob rows. `flavors`:
    {id: Flavor}; `members`: {team id: a user of the team}. Returns how many."""
    rows = []
    for done in ran.values():
        if done.finished_at is None or done.finished_at > until:
            continue
        job, placement = done.arrival, done.placement
        flavor = flavors[job.flavor_id]
        on_demand = (
            Decimal(job.gpus * job.parallelism * job.expected_minutes)
            / 60
            * flavor.price_per_gpu_hour
        ).quantize(Decimal("0.01"))
        used = (done.finished_at - done.started_at).total_seconds()
        rows.append(
            BatchJob(
                team_id=job.team_id,
                name=f"{PREFIX}{job.id}",
                flavor=flavor,
                image=IMAGE,
                gpus=job.gpus,
                parallelism=job.parallelism,
                completions=job.parallelism,
                expected_runtime_minutes=job.expected_minutes,
                max_runtime_minutes=job.max_minutes,
                priority=job.priority,
                status=(
                    BatchJob.Status.SUCCEEDED
                    if used < done.deadline_seconds
                    else BatchJob.Status.DEADLINE_EXCEEDED
                ),
                window_id=placement.slot.window_id,
                opens_at=placement.slot.opens_at,
                closes_at=placement.slot.closes_at,
                planned_start=placement.starts_at,
                planned_end=placement.ends_at,
                explanation="From the made-up history (batch.history).",
                first_eta=done.first_eta,
                estimated_cost=on_demand,
                on_demand_cost=on_demand,
                released_at=done.released_at,
                deadline_seconds=done.deadline_seconds,
                started_at=done.started_at,
                finished_at=done.finished_at,
                used_gpu_seconds=int(used * job.gpus * job.parallelism),
                created_by=members[job.team_id],
            )
        )
    created = BatchJob.objects.bulk_create(rows)
    # created_at is auto_now_add: set to the submission after the insert.
    submitted = {f"{PREFIX}{d.arrival.id}": d.arrival.submitted_at for d in ran.values()}
    for row in created:
        row.created_at = submitted[row.name]
    BatchJob.objects.bulk_update(created, ["created_at"], batch_size=500)
    return len(created)


def month(pattern, *, until, days=30, seed=1, members):
    """Make up and write `days` of history in `pattern` up to `until` (jobs that would
    still run then are left out), in the enabled windows as they are. `members`:
    {team id: a user of the team}, the teams that submit. Returns the number of jobs."""
    start = until - timedelta(days=days)
    windows = actions.windows_with_occurrences(start, until + actions.horizon())
    slots = actions.window_slots(windows, actions.usable_capacities(windows))
    past = [slot for slot in slots if slot.opens_at < until]
    found = arrivals(pattern, past, sorted(members), start, days, seed=seed)
    flavors = Flavor.objects.in_bulk({a.flavor_id for a in found})
    return write(run(slots, found, seed=seed), flavors=flavors, members=members, until=until)
