"""Why a queued or planned batch job is not running, when it will start, and what
would start it sooner.

The planner (batch/planner.py) is asked again with the inputs of a run at this
instant: once for the job as it is, then once per variation of the job (fewer
GPUs per pod, a shorter maximum runtime, another flavor with batch capacity).
A variation is shown when it starts the job sooner than it is planned now, or
at all when nothing is planned. Spot is not a variation: it changes a job's
price, not where the planner puts it.

A planner run is a few milliseconds for a queue of hundreds of jobs; a job's
page asks for at most 2 + MAX_FLAVORS + a few runs (docs/batch.md).
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from batch import actions, eta, planner
from batch.models import BatchJob, PlannerState
from cluster import clock
from cluster.models import Flavor
from teams.models import Team

# Other flavors tried as alternatives (those with batch capacity, the cheapest first).
MAX_FLAVORS = 4

# (code, what people read); the text is completed with the figures of the case.
REASONS = {
    "starting": "Its occurrence is open: it is being started.",
    "window_not_open": "Planned; its window has not opened yet.",
    "behind_others": "Planned to start after work ahead of it in the same occurrence.",
    "capacity_taken": "Work ahead of it takes the capacity of an earlier occurrence.",
    "not_before_close": (
        "Its maximum runtime does not fit in what was left of an earlier occurrence."
    ),
    "too_big_there": "An earlier occurrence gives fewer GPUs of its flavor than it needs.",
    "too_big": "No window gives this many GPUs of its flavor.",
    "too_long": "No window is long enough for its maximum runtime.",
    "held_by_budget": (
        "Held: its cost at its maximum runtime would take the team past its hard budget."
    ),
    "no_window": "No window with capacity for its flavor opens in the planning horizon.",
}


@dataclass(frozen=True)
class Ahead:
    team: str
    jobs: int
    gpus: int


@dataclass(frozen=True)
class Alternative:
    change: str  # "gpus", "max_runtime", "flavor"
    text: str
    eta: datetime


@dataclass
class Explanation:
    code: str
    text: str
    eta: datetime | None
    eta_range: eta.Range | None = None  # where the start falls, CONFIDENCE of the time
    occurrence: str = ""  # the occurrence the reason is about, "Night, Fri 05 Dec 20:00-..."
    ahead: list = field(default_factory=list)  # [Ahead], teams with work in it before this job
    share_position: int | None = None  # the team's place in the fair share there (1: first)
    share_teams: int | None = None
    alternatives: list = field(default_factory=list)  # [Alternative], soonest first


def explain(job, now=None):
    """The Explanation of a queued or planned `job`, or None for any other status."""
    if job.status not in BatchJob.PLANNABLE:
        return None
    now = now or clock.now()
    state = PlannerState.objects.filter(pk=1).first() or PlannerState()
    _, _, inputs, held = actions.plan_inputs(now, state)
    if job.pk in held:
        return Explanation("held_by_budget", held[job.pk], None)
    result = planner.plan(**_with(inputs, actions.planner_job(job)))
    found = _reason(job.pk, result, inputs, now)
    if found.eta is not None:
        found.eta_range = eta.range_of(found.eta, now, eta.recent_errors(now))  # a query
    found.alternatives = _alternatives(job, inputs, found.eta)
    return found


def _with(inputs, varied):
    """The inputs with the job replaced by `varied` (the same id)."""
    jobs = [j for j in inputs["jobs"] if j.id != varied.id] + [varied]
    return inputs | {"jobs": jobs}


def _eta(job_id, result):
    placement = result.placements.get(job_id)
    return placement.starts_at if placement else None


# The planner's codes (batch/planner.py) as reasons.
MISSED = {
    planner.TAKEN: "capacity_taken",
    planner.TOO_LONG: "not_before_close",
    planner.TOO_BIG: "too_big_there",
}
NOWHERE = {planner.NO_WINDOW_BIG: "too_big", planner.NO_WINDOW_LONG: "too_long"}


def _reason(job_id, result, inputs, now):
    placement = result.placements.get(job_id)
    miss = result.first_miss.get(job_id)
    if placement is None and result.unplaced.get(job_id) in NOWHERE:
        return _explained(NOWHERE[result.unplaced[job_id]])
    if miss is not None:
        # It missed an earlier occurrence: that is why it is not running sooner.
        slot, code = miss
        found = _explained(MISSED[code])
        if code == planner.TAKEN:
            _describe_crowd(found, job_id, slot, result, inputs)
    elif placement is not None:
        slot = placement.slot
        if placement.starts_at <= now:
            found = _explained("starting")
        elif placement.starts_at > max(slot.opens_at, now):
            found = _explained("behind_others")
            _describe_crowd(found, job_id, slot, result, inputs, before=placement.starts_at)
        else:
            found = _explained("window_not_open")
    else:
        return _explained("no_window")
    found.eta = _eta(job_id, result)
    found.occurrence = slot.label
    return found


def _explained(code):
    return Explanation(code, REASONS[code], None)


def _describe_crowd(found, job_id, slot, result, inputs, before=None):
    """Who holds `slot` ahead of the job (planned there, or released and running),
    and the team's place in the fair share among the teams with work there."""
    job = next(j for j in inputs["jobs"] if j.id == job_id)
    jobs = Counter()
    gpus = Counter()
    for placement in result.placements.values():
        if placement.slot.key != slot.key or placement.job_id == job_id:
            continue
        if before is not None and placement.starts_at >= before:
            continue
        other = next(j for j in inputs["jobs"] if j.id == placement.job_id)
        jobs[other.team_id] += 1
        gpus[other.team_id] += other.gpus
    for hold in inputs["holds"]:
        if (hold.window_id, hold.flavor_id, hold.opens_at) == slot.key:
            jobs[hold.team_id] += 1
            gpus[hold.team_id] += hold.gpus
    names = dict(Team.objects.filter(pk__in=list(jobs)).values_list("pk", "name"))
    found.ahead = [
        Ahead(names.get(team_id, "another team"), count, gpus[team_id])
        for team_id, count in jobs.most_common()
    ]
    # The planner serves teams in order of (recent usage + work planned) / weight.
    usage = inputs["recent_usage"]
    weights = inputs["weights"]
    teams = {j.team_id for j in inputs["jobs"] if j.flavor_id == slot.flavor_id} | set(jobs)
    order = sorted(teams, key=lambda t: (usage.get(t, 0) / weights.get(t, 1), t))
    found.share_position = order.index(job.team_id) + 1
    found.share_teams = len(order)
    text = ", ".join(
        f"{a.team}: {a.jobs} job{'s' * (a.jobs > 1)} ({a.gpus} GPUs)" for a in found.ahead
    )
    if text:
        found.text = f"{found.text} Ahead of it: {text}."


def _variations(job, inputs):
    """(change, text, BatchJob field changes) worth asking the planner about."""
    gpus = job.gpus // 2
    while gpus >= 1:
        noun = "GPU" if gpus == 1 else "GPUs"
        yield "gpus", f"With {gpus} {noun} per pod instead of {job.gpus}", {"gpus": gpus}
        gpus //= 2
    if job.expected_runtime_minutes < job.max_runtime_minutes:
        minutes = job.expected_runtime_minutes
        yield (
            "max_runtime",
            f"With a maximum runtime of {minutes} min (its expected runtime) "
            f"instead of {job.max_runtime_minutes} min",
            {"max_runtime_minutes": minutes},
        )
    with_capacity = {slot.flavor_id for slot in inputs["slots"]} - {job.flavor_id}
    others = Flavor.objects.filter(pk__in=with_capacity, is_active=True).order_by(
        "price_per_gpu_hour", "name"
    )
    for flavor in others[:MAX_FLAVORS]:
        yield "flavor", f"On {flavor.name} instead of {job.flavor.name}", {"flavor_id": flavor.pk}


def _alternatives(job, inputs, eta):
    found = []
    for change, text, fields in _variations(job, inputs):
        result = planner.plan(**_with(inputs, actions.planner_job(job, **fields)))
        sooner = _eta(job.pk, result)
        if sooner is not None and (eta is None or sooner < eta):
            found.append(Alternative(change, text, sooner))
    return sorted(found, key=lambda a: a.eta)
