"""The batch planner: a pure function from jobs and window occurrences to a plan.

No database, no clock: everything it needs comes in as plain data, so the same
input always gives the same plan (inputs are sorted first, ties are broken by
ids). What it guarantees, and the property tests check:

- plans in time: each job gets a start inside one occurrence of a window of its
  flavor, and at no instant do the GPUs of the jobs planned (and held) in that
  occurrence exceed the window's batch capacity for the flavor;
- every job's maximum runtime ends by the close: one that cannot is not started
  in that occurrence and moves on to the next that fits, with the reason;
- fair between teams: occurrences are filled one job at a time, each time for
  the team with the lowest share, `(recent usage + GPU-hours planned in this
  run) / weight`; within a team, higher priority first, then the oldest;
- no starvation: a team whose fitting work got nothing in the previous
  occurrence(s) of the flavor while others got capacity goes first, longest
  waiting first. With T teams none waits more than T occurrences in a row.
  The counters outlive a run (`Waiting`, stored by the caller): an occurrence
  is counted once, by the first run that plans it within `settle_until`; later
  runs plan it again from the counters it started with, so a replan neither
  counts it twice nor reorders it.

Time runs in float seconds (POSIX) inside; datetimes at the edges.
"""

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class Slot:
    """One flavor's batch capacity in one occurrence of one window."""

    window_id: int
    flavor_id: int
    opens_at: datetime
    closes_at: datetime
    capacity: int
    label: str = ""  # "Fri 27 Feb 20:00-02:00 America/New_York", for explanations

    @property
    def key(self):
        return (self.window_id, self.flavor_id, self.opens_at)


@dataclass(frozen=True)
class Job:
    id: int
    team_id: int
    flavor_id: int
    gpus: int  # all pods together
    runtime: timedelta  # the maximum: the plan must hold even if it is all used
    priority: int = 0
    submitted_at: datetime | None = None
    target_window_id: int | None = None
    target_opens_at: datetime | None = None


@dataclass(frozen=True)
class Hold:
    """Capacity already taken in an occurrence (jobs released, running, or done early)."""

    window_id: int
    flavor_id: int
    opens_at: datetime
    starts_at: datetime
    ends_at: datetime
    gpus: int
    team_id: int | None = None


@dataclass(frozen=True)
class Waiting:
    """One flavor's no-starvation counters, carried from run to run: occurrences in
    a row each team's fitting work got nothing while others got capacity, before
    and after the last occurrence counted (`through`: its (opens_at, window id))."""

    through: tuple | None = None
    before: dict = field(default_factory=dict)  # team id -> occurrences
    after: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    job_id: int
    slot: Slot
    starts_at: datetime
    ends_at: datetime


@dataclass
class Plan:
    placements: dict = field(default_factory=dict)  # job id -> Placement
    reasons: dict = field(default_factory=dict)  # job id -> [str], in the order decided
    gpu_hours: dict = field(default_factory=dict)  # team id -> GPU-hours planned in this run
    misses: dict = field(default_factory=dict)  # job id -> occurrences it did not fit
    # job id -> (slot, code) of the first occurrence it did not fit, code one of
    # TOO_BIG, TOO_LONG (not before the close), TAKEN (the capacity was taken).
    first_miss: dict = field(default_factory=dict)
    unplaced: dict = field(default_factory=dict)  # job id -> NO_WINDOW_BIG, NO_WINDOW_LONG, LATER
    waiting: dict = field(default_factory=dict)  # flavor id -> Waiting, to carry to the next run

    def explanation(self, job_id):
        return " ".join(self.reasons.get(job_id, []))


def _ts(moment):
    return moment.timestamp()


def _dt(seconds):
    return datetime.fromtimestamp(seconds, UTC)


def hours(seconds):
    value = seconds / 3600
    return f"{value:.0f} h" if value == int(value) else f"{value:.1f} h"


class Profile:
    """GPUs in use over [start, end) as a step function: segment i is [times[i], times[i+1])."""

    def __init__(self, start, end, capacity):
        self.times = [start, end]
        self.used = [0]
        self.capacity = capacity

    def _split(self, moment):
        index = bisect_left(self.times, moment)
        if index < len(self.times) and self.times[index] == moment:
            return index
        self.times.insert(index, moment)
        self.used.insert(index, self.used[index - 1])
        return index

    def add(self, start, end, gpus):
        start, end = max(start, self.times[0]), min(end, self.times[-1])
        if start >= end:
            return
        first, last = self._split(start), self._split(end)
        for index in range(first, last):
            self.used[index] += gpus

    def earliest(self, gpus, duration, not_before):
        """The first start >= not_before with room for `gpus` for `duration`, or None."""
        limit = self.capacity - gpus
        begin = None
        first = max(0, bisect_right(self.times, not_before) - 1)
        for index in range(first, len(self.used)):
            if self.used[index] <= limit:
                if begin is None:
                    begin = max(self.times[index], not_before)
                if begin + duration <= self.times[index + 1]:
                    return begin
            else:
                begin = None
        return None

    def longest_free(self, gpus, not_before):
        """The longest stretch with room for `gpus` after `not_before`, in seconds."""
        limit = self.capacity - gpus
        best, begin = 0.0, None
        first = max(0, bisect_right(self.times, not_before) - 1)
        for index in range(first, len(self.used)):
            if self.used[index] <= limit:
                if begin is None:
                    begin = max(self.times[index], not_before)
                best = max(best, self.times[index + 1] - begin)
            else:
                begin = None
        return best

    def peak(self):
        return max(self.used)


def _order_key(job):
    submitted = _ts(job.submitted_at) if job.submitted_at else 0.0
    return (-job.priority, submitted, job.id)


def _targets(job, slot):
    if job.target_window_id is not None and job.target_window_id != slot.window_id:
        return False
    return job.target_opens_at is None or job.target_opens_at == slot.opens_at


def plan(
    slots,
    jobs,
    *,
    now,
    holds=(),
    weights=None,
    recent_usage=None,
    waiting=None,
    settle_until=None,
):
    """Place `jobs` into `slots`; see the module's docstring for the rules.

    weights: {team id: weight > 0} (default 1); recent_usage: {team id: GPU-hours
    used in recent windows}; waiting: {flavor id: Waiting} from the previous run
    (`Plan.waiting`); settle_until: occurrences opening by then are counted for
    good (None: none are, the counters only order this run).
    """
    weights = weights or {}
    usage = defaultdict(float, {t: float(h) * 3600 for t, h in (recent_usage or {}).items()})
    carried = dict(waiting or {})
    # The counters in this run, (team id, flavor id) -> occurrences waited.
    waiting = defaultdict(int)
    for flavor_id, counters in carried.items():
        waiting.update({(team, flavor_id): n for team, n in counters.after.items()})
    result = Plan()
    now_s = _ts(now)

    held = defaultdict(list)
    for hold in holds:
        held[(hold.window_id, hold.flavor_id, hold.opens_at)].append(hold)

    queued = defaultdict(list)  # flavor id -> jobs, in team order
    for job in sorted(jobs, key=lambda j: (j.team_id, *_order_key(j))):
        queued[job.flavor_id].append(job)
    biggest = defaultdict(int)  # flavor id -> most GPUs any slot gives
    longest = defaultdict(float)
    for slot in slots:
        biggest[slot.flavor_id] = max(biggest[slot.flavor_id], slot.capacity)
        duration = _ts(slot.closes_at) - max(_ts(slot.opens_at), now_s)
        longest[slot.flavor_id] = max(longest[slot.flavor_id], duration)

    for slot in sorted(slots, key=lambda s: (s.opens_at, s.window_id, s.flavor_id)):
        opens, closes = _ts(slot.opens_at), _ts(slot.closes_at)
        start_from = max(opens, now_s)
        if start_from >= closes or slot.capacity <= 0:
            continue
        profile = Profile(opens, closes, slot.capacity)
        for hold in held.get(slot.key, ()):
            profile.add(_ts(hold.starts_at), _ts(hold.ends_at), hold.gpus)

        by_team = defaultdict(list)
        for job in queued.get(slot.flavor_id, ()):
            if job.id in result.placements or not _targets(job, slot):
                continue
            runtime = job.runtime.total_seconds()
            if job.gpus > slot.capacity:
                _note(
                    result,
                    job,
                    slot,
                    TOO_BIG,
                    f"needs {job.gpus} GPUs, the window gives {slot.capacity}",
                )
            elif start_from + runtime > closes:
                left = hours(closes - start_from)
                _note(
                    result,
                    job,
                    slot,
                    TOO_LONG,
                    f"{hours(runtime)} needed, only {left} in the window",
                )
            else:
                by_team[job.team_id].append(job)
        if not by_team:
            continue
        counters = carried.get(slot.flavor_id, Waiting())
        counted = counters.through is not None and (slot.opens_at, slot.window_id) <= tuple(
            counters.through
        )
        if counted and (slot.opens_at, slot.window_id) == tuple(counters.through):
            # Counted by an earlier run: order it as that run did.
            for team in by_team:
                waiting[(team, slot.flavor_id)] = counters.before.get(team, 0)
        settles = not counted and settle_until is not None and slot.opens_at <= settle_until
        if settles:
            before = {t: n for (t, f), n in waiting.items() if f == slot.flavor_id and n}

        heap = [
            (-waiting[(team, slot.flavor_id)], usage[team] / weights.get(team, 1), team)
            for team in by_team
        ]
        heapq.heapify(heap)
        position = dict.fromkeys(by_team, 0)
        failed = []  # (gpus, seconds) that did not fit: bigger jobs cannot either
        served = set()
        while heap:
            _, _, team = heapq.heappop(heap)
            team_jobs = by_team[team]
            while position[team] < len(team_jobs):
                job = team_jobs[position[team]]
                position[team] += 1
                runtime = job.runtime.total_seconds()
                known = any(g <= job.gpus and r <= runtime for g, r in failed)
                start = None if known else profile.earliest(job.gpus, runtime, start_from)
                if start is None:
                    if not known:
                        # Keep only the smallest shapes that failed: bigger ones fail too.
                        failed = [(g, r) for g, r in failed if g < job.gpus or r < runtime]
                        failed.append((job.gpus, runtime))
                    _note(
                        result,
                        job,
                        slot,
                        TAKEN,
                        lambda job=job, runtime=runtime, profile=profile, start_from=start_from: (
                            f"{hours(runtime)} needed, "
                            f"{hours(profile.longest_free(job.gpus, start_from))} left for "
                            f"{job.gpus} GPUs after work of higher priority or smaller share"
                        ),
                    )
                    continue
                profile.add(start, start + runtime, job.gpus)
                result.placements[job.id] = Placement(
                    job.id, slot, _dt(start), _dt(start + runtime)
                )
                charge = job.gpus * runtime
                usage[team] += charge
                result.gpu_hours[team] = result.gpu_hours.get(team, 0) + charge / 3600
                served.add(team)
                # Stored text read by people in any zone: the start is told from the
                # opening (the page shows the planned start in each viewer's zone).
                offset = start - _ts(slot.opens_at)
                when = f"{hours(offset)} after it opens" if offset > 0 else "when it opens"
                result.reasons.setdefault(job.id, []).append(
                    f"Planned for {slot.label or slot.opens_at.isoformat()}, starting {when}."
                )
                if position[team] < len(team_jobs):
                    heapq.heappush(heap, (0, usage[team] / weights.get(team, 1), team))
                break
        served |= {hold.team_id for hold in held.get(slot.key, ()) if hold.team_id in by_team}
        if counted:
            for team in by_team:
                waiting[(team, slot.flavor_id)] = counters.after.get(team, 0)
            continue
        for team in by_team:
            if team in served:
                waiting[(team, slot.flavor_id)] = 0
            elif served:
                waiting[(team, slot.flavor_id)] += 1
        if settles:
            after = {t: n for (t, f), n in waiting.items() if f == slot.flavor_id and n}
            carried[slot.flavor_id] = Waiting((slot.opens_at, slot.window_id), before, after)

    for flavor_jobs in queued.values():
        for job in flavor_jobs:
            if job.id in result.placements:
                continue
            if job.gpus > biggest[job.flavor_id]:
                _say(result, job, NO_WINDOW_BIG, f"No window gives {job.gpus} GPUs of this flavor.")
            elif job.runtime.total_seconds() > longest[job.flavor_id]:
                _say(
                    result, job, NO_WINDOW_LONG, "No window is long enough for its maximum runtime."
                )
            else:
                _say(result, job, LATER, "Waiting for a later occurrence.")
    result.waiting = carried
    return result


# Explanations stay short: the first few occurrences a job missed, then a count.
MAX_MISSES = 3

# Why a job missed an occurrence (Plan.first_miss) or has none (Plan.unplaced).
TOO_BIG, TOO_LONG, TAKEN = "too_big", "too_long", "taken"
NO_WINDOW_BIG, NO_WINDOW_LONG, LATER = "no_window_big", "no_window_long", "later"


def _note(result, job, slot, code, why):
    """Say why `job` missed `slot`; `why` is text, or a callable made only when it is said."""
    result.first_miss.setdefault(job.id, (slot, code))
    misses = result.misses.get(job.id, 0)
    if misses > MAX_MISSES:
        return
    result.misses[job.id] = misses + 1
    reasons = result.reasons.setdefault(job.id, [])
    if misses == MAX_MISSES:
        reasons.append("Did not fit later occurrences either.")
        return
    text = why() if callable(why) else why
    reasons.append(f"Did not fit {slot.label or slot.opens_at.isoformat()}: {text}.")


def _say(result, job, code, sentence):
    result.unplaced[job.id] = code
    result.reasons.setdefault(job.id, []).append(sentence)
