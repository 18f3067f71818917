"""Figures for the calendar and the occurrences API: per occurrence and flavor,
the batch capacity, the most GPUs planned at any instant, and a team's share."""

from collections import defaultdict
from datetime import datetime, time, timedelta

from batch.models import BatchJob
from batch.occurrences import label
from batch.planner import Profile

Status = BatchJob.Status
COUNTED = (
    *BatchJob.PLANNABLE,
    *BatchJob.HOLDING,
    Status.SUCCEEDED,
    Status.FAILED,
    Status.DEADLINE_EXCEEDED,
)


def planned_jobs(windows):
    """The values of the jobs planned into the openings of `windows` ([(window,
    occurrences, capacity)]): the calendar's one query. It asks for those openings
    by their instants (index `batch_job_window_opening`), so it reads the jobs it
    shows, not the history before them."""
    openings = {occurrence.opens_at for _, found, _ in windows for occurrence in found}
    return (
        BatchJob.objects.filter(
            window_id__in=[window.pk for window, _, _ in windows],
            opens_at__in=sorted(openings),
            status__in=[s for s in COUNTED if s != Status.QUEUED],
        )
        .order_by()
        .values_list(
            "window_id",
            "opens_at",
            "flavor_id",
            "planned_start",
            "planned_end",
            "finished_at",
            "gpus",
            "parallelism",
            "team_id",
            "pk",
            "name",
        )
    )


def _planned(windows):
    """{(window id, opens_at, flavor id): [(start, end, gpus, team id, job id, name)]}.
    One query."""
    found = defaultdict(list)
    for row in planned_jobs(windows):
        window_id, opens_at, flavor_id, start, end, finished, gpus, pods, *rest = row
        if finished is not None:
            end = min(end, finished)
        found[(window_id, opens_at, flavor_id)].append((start, end, gpus * pods, *rest))
    return found


def _peak(intervals):
    """Most GPUs the planned jobs hold at once: the planner's own step function."""
    if not intervals:
        return 0
    profile = Profile(min(s for s, *_ in intervals), max(e for _, e, *_ in intervals), None)
    for start, end, gpus, *_ in intervals:
        profile.add(start, end, gpus)
    return profile.peak()


def _share(intervals, team_ids):
    total = sum((e - s).total_seconds() * g for s, e, g, *_ in intervals)
    if not total or not team_ids:
        return None
    mine = sum((e - s).total_seconds() * g for s, e, g, t, *_ in intervals if t in team_ids)
    return round(100 * mine / total)


def occurrence_rows(windows, *, team_ids=()):
    """[{window, occurrence, label, flavors: [{flavor, capacity, planned, jobs, share}]}]
    for `windows` = [(window, occurrences, {flavor id: GPUs})], oldest first."""
    planned = _planned(windows)
    rows = []
    for window, found, capacity in windows:
        flavors = {c.flavor_id: c.flavor for c in window.capacities.all()}
        for occurrence in found:
            cells = []
            for flavor_id, gpus in sorted(capacity.items(), key=lambda i: flavors[i[0]].name):
                intervals = planned.get((window.pk, occurrence.opens_at, flavor_id), [])
                cells.append(
                    {
                        "flavor": flavors[flavor_id],
                        "capacity": gpus,
                        "planned": _peak(intervals),
                        "jobs": len(intervals),
                        "share": _share(intervals, set(team_ids)),
                        "intervals": intervals,
                    }
                )
            rows.append(
                {
                    "window": window,
                    "occurrence": occurrence,
                    "label": label(occurrence, window.timezone),
                    "flavors": cells,
                }
            )
    rows.sort(key=lambda row: (row["occurrence"].opens_at, row["window"].name))
    return rows


def window_occurrences(window, starts_at, ends_at):
    """The occurrences API's body for one window."""
    capacity = {c.flavor_id: c.gpus for c in window.capacities.all()}
    found = window.occurrences(starts_at, ends_at)
    return [
        {
            "opens_at": row["occurrence"].opens_at,
            "closes_at": row["occurrence"].closes_at,
            "local_date": row["occurrence"].local_date,
            "label": row["label"],
            "flavors": {
                cell["flavor"].slug: {
                    "capacity": cell["capacity"],
                    "planned_gpus": cell["planned"],
                    "jobs": cell["jobs"],
                }
                for cell in row["flavors"]
            },
        }
        for row in occurrence_rows([(window, found, capacity)])
    ]


# --- the week view: a column per day, a block per opening, the planned jobs inside ---

JOB_LANES = 5  # jobs side by side in a block; more share lanes


def week(rows, first_day, zone, *, team_ids, everyone):
    """Seven day columns from `first_day` (a date in `zone`) for one flavor's `rows`
    (occurrence_rows entries with their flavor's `cell`). Pure: geometry in percent of
    a day (blocks) and of a block (jobs). A job of another team is drawn unnamed
    unless `everyone` (admins)."""
    days = []
    for offset in range(7):
        day = first_day + timedelta(days=offset)
        starts = datetime.combine(day, time(0), zone)
        ends = datetime.combine(day + timedelta(days=1), time(0), zone)
        span = (ends - starts).total_seconds()
        blocks = []
        for row in rows:
            occurrence, cell = row["occurrence"], row["cell"]
            first, last = max(occurrence.opens_at, starts), min(occurrence.closes_at, ends)
            if first >= last:
                continue
            blocks.append(
                {
                    "window": row["window"],
                    "label": row["label"],
                    "top": (first - starts).total_seconds() / span * 100,
                    "height": (last - first).total_seconds() / span * 100,
                    "hours": f"{first.astimezone(zone):%H:%M}–"
                    + ("24:00" if last == ends else f"{last.astimezone(zone):%H:%M}"),
                    "capacity": cell["capacity"],
                    "planned": cell["planned"],
                    "share": cell["share"],
                    "jobs": _jobs_in(cell["intervals"], first, last, zone, team_ids, everyone),
                }
            )
        days.append({"day": day, "starts": starts, "blocks": blocks})
    return days


def _jobs_in(intervals, first, last, zone, team_ids, everyone):
    span = (last - first).total_seconds()
    jobs = []
    for lane, (start, end, gpus, team_id, pk, name) in enumerate(sorted(intervals)):
        start, end = max(start, first), min(end, last)
        if start >= end:
            continue
        mine = team_id in team_ids
        jobs.append(
            {
                "pk": pk if mine or everyone else None,
                "name": name if mine or everyone else "another team's job",
                "gpus": gpus,
                "mine": mine,
                "hours": f"{start.astimezone(zone):%H:%M} to {end.astimezone(zone):%H:%M}",
                "top": (start - first).total_seconds() / span * 100,
                "height": max((end - start).total_seconds() / span * 100, 2),
                "left": 46 + (lane % JOB_LANES) * 10,  # percent of the block; its label is left
            }
        )
    return jobs
