"""How often actual starts fell inside the start range the portal would have shown
at submission: a stretch of the installation's own history replayed through the
planner as it was at each submission (`manage.py backtest_eta`).

At each job's submission the planner is asked again with what was known then:
the jobs submitted and not yet released or ended (waiting), those released and
their occurrence not closed (holding capacity until their planned end, or their
end if it came), the recent usage of the teams, and the no-starvation counters
carried from the previous replayed run. Its start for the job is the point
estimate; the range is `batch.eta.range_of` with the errors of the replayed jobs
that had started by then. Windows and capacities are taken as they are now (no
history of them is kept), shares as they are now.

The jobs are swept in time order, so a replay costs one planner run per job over
the jobs waiting then; docs/benchmarks.md has its growth.
"""

import bisect
import heapq
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from batch import actions, eta, planner
from batch.models import BatchJob, TeamShare

FIELDS = (
    "pk",
    "team_id",
    "flavor_id",
    "gpus",
    "parallelism",
    "max_runtime_minutes",
    "priority",
    "created_at",
    "target_window_id",
    "target_opens_at",
    "window_id",
    "opens_at",
    "closes_at",
    "planned_start",
    "planned_end",
    "released_at",
    "started_at",
    "finished_at",
    "used_gpu_seconds",
)


@dataclass(frozen=True)
class Row:
    pk: int
    team_id: int
    flavor_id: int
    gpus: int
    parallelism: int
    max_runtime_minutes: int
    priority: int
    created_at: datetime
    target_window_id: int | None
    target_opens_at: datetime | None
    window_id: int | None
    opens_at: datetime | None
    closes_at: datetime | None
    planned_start: datetime | None
    planned_end: datetime | None
    released_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    used_gpu_seconds: int

    def as_planned(self):
        return planner.Job(
            self.pk,
            self.team_id,
            self.flavor_id,
            self.gpus * self.parallelism,
            timedelta(minutes=self.max_runtime_minutes),
            self.priority,
            self.created_at,
            self.target_window_id,
            self.target_opens_at,
        )

    def hold(self, now):
        """Its capacity as the planner saw it at `now` (it was released by then)."""
        ended = self.finished_at is not None and self.finished_at <= now
        return planner.Hold(
            self.window_id,
            self.flavor_id,
            self.opens_at,
            self.planned_start,
            self.finished_at if ended else self.planned_end,
            self.gpus * self.parallelism,
            self.team_id,
        )


@dataclass(frozen=True)
class Replayed:
    job_id: int
    submitted_at: datetime
    estimate: datetime | None  # None: the planner placed it nowhere in its horizon
    range: eta.Range | None
    actual: datetime | None  # its pods running; None: it never started (by `until`)

    @property
    def inside(self):
        return self.range.starts_from <= self.actual <= self.range.starts_to


def rows(since, until):
    """The jobs the replay of submissions in [since, until) needs, oldest first: those
    submitted before `until` that had not ended by the start of the usage period."""
    usage_since = since - timedelta(days=settings.PORTAL_BATCH_USAGE_DAYS)
    found = BatchJob.objects.filter(created_at__lt=until).filter(
        Q(finished_at__isnull=True) | Q(finished_at__gte=usage_since)
    )
    return [Row(*values) for values in found.order_by("created_at", "pk").values_list(*FIELDS)]


def replay(jobs, since, until, *, confidence=eta.CONFIDENCE):
    """[Replayed] of the `jobs` (Rows, oldest first) submitted in [since, until)."""
    lead = timedelta(seconds=settings.PORTAL_BATCH_PLAN_LEAD)
    usage_days = timedelta(days=settings.PORTAL_BATCH_USAGE_DAYS)
    history_days = timedelta(days=eta.HISTORY_DAYS)
    horizon = actions.horizon()
    windows = actions.windows_with_occurrences(since, until + horizon)
    slots = sorted(
        actions.window_slots(windows, actions.usable_capacities(windows)),
        key=lambda s: s.opens_at,
    )
    opens = [slot.opens_at for slot in slots]
    longest = max((s.closes_at - s.opens_at for s in slots), default=timedelta(0))
    weights = {t: float(w) for t, w in TeamShare.objects.values_list("team_id", "weight")}

    as_planned = {job.pk: job.as_planned() for job in jobs}  # made once, not once a run
    by_release = sorted((j for j in jobs if j.released_at), key=lambda j: j.released_at)
    by_finish = sorted((j for j in jobs if j.finished_at), key=lambda j: j.finished_at)
    submitted, released, usage_in, usage_out = 0, 0, 0, 0
    waiting, holding, usage = {}, {}, {}
    started = []  # heap of (actual start, error) of replayed jobs not yet known
    known, by_age = [], deque()  # sorted errors; (actual start, error) oldest first
    counters = {}
    found = []
    for job in jobs:
        if not since <= job.created_at < until:
            continue
        now = job.created_at
        while submitted < len(jobs) and jobs[submitted].created_at <= now:
            waiting[jobs[submitted].pk] = jobs[submitted]
            submitted += 1
        while released < len(by_release) and by_release[released].released_at <= now:
            holding[by_release[released].pk] = by_release[released]
            released += 1
        # Recent usage: the GPU-seconds of jobs that ended in [now - usage_days, now).
        while usage_in < len(by_finish) and by_finish[usage_in].finished_at < now:
            ended = by_finish[usage_in]
            usage[ended.team_id] = usage.get(ended.team_id, 0) + ended.used_gpu_seconds
            usage_in += 1
        while usage_out < usage_in and by_finish[usage_out].finished_at < now - usage_days:
            ended = by_finish[usage_out]
            usage[ended.team_id] -= ended.used_gpu_seconds
            usage_out += 1
        waiting = {
            pk: j
            for pk, j in waiting.items()
            if (j.released_at is None or j.released_at > now)
            and (j.finished_at is None or j.finished_at > now)
        }
        holding = {
            pk: j for pk, j in holding.items() if j.planned_start is not None and j.closes_at > now
        }
        first = bisect.bisect_left(opens, now - longest)
        last = bisect.bisect_left(opens, now + horizon)
        result = planner.plan(
            [s for s in slots[first:last] if s.closes_at > now],
            [as_planned[pk] for pk in waiting],
            now=now,
            holds=[j.hold(now) for j in holding.values()],
            weights=weights,
            recent_usage={t: s / 3600 for t, s in usage.items()},
            waiting=counters,
            settle_until=now + lead,
        )
        counters = result.waiting

        while started and started[0][0] <= now:
            at, error = heapq.heappop(started)
            bisect.insort(known, error)
            by_age.append((at, error))
        while by_age and by_age[0][0] <= now - history_days:
            known.pop(bisect.bisect_left(known, by_age.popleft()[1]))

        placement = result.placements.get(job.pk)
        estimate = placement.starts_at if placement else None
        actual = job.started_at if job.started_at and job.started_at <= until else None
        shown = eta.range_of(estimate, now, known, confidence) if estimate else None
        found.append(Replayed(job.pk, now, estimate, shown, actual))
        if estimate and actual:
            heapq.heappush(started, (actual, eta.relative_error(estimate, actual, now)))
    return found
