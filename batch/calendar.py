"""Figures for the calendar and the occurrences API: per occurrence and flavor,
the batch capacity, the most GPUs planned at any instant, and a team's share."""

from collections import defaultdict

from batch.models import BatchJob
from batch.occurrences import label

Status = BatchJob.Status
COUNTED = (
    *BatchJob.PLANNABLE,
    *BatchJob.HOLDING,
    Status.SUCCEEDED,
    Status.FAILED,
    Status.DEADLINE_EXCEEDED,
)


def _planned(window_ids, starts_at, ends_at):
    """{(window id, opens_at, flavor id): [(start, end, gpus, team id)]}. One query."""
    rows = (
        BatchJob.objects.filter(
            window_id__in=window_ids,
            opens_at__lt=ends_at,
            closes_at__gt=starts_at,
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
        )
    )
    found = defaultdict(list)
    for window_id, opens_at, flavor_id, start, end, finished, gpus, pods, team_id in rows:
        if finished is not None:
            end = min(end, finished)
        found[(window_id, opens_at, flavor_id)].append((start, end, gpus * pods, team_id))
    return found


def _peak(intervals):
    points = {start for start, _, _, _ in intervals}
    return max((sum(g for s, e, g, _ in intervals if s <= t < e) for t in points), default=0)


def _share(intervals, team_ids):
    total = sum((e - s).total_seconds() * g for s, e, g, _ in intervals)
    if not total or not team_ids:
        return None
    mine = sum((e - s).total_seconds() * g for s, e, g, t in intervals if t in team_ids)
    return round(100 * mine / total)


def occurrence_rows(windows, starts_at, ends_at, *, team_ids=()):
    """[{window, occurrence, label, flavors: [{flavor, capacity, planned, jobs, share}]}]
    for `windows` = [(window, occurrences, {flavor id: GPUs})], oldest first."""
    planned = _planned([w.pk for w, _, _ in windows], starts_at, ends_at)
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
        for row in occurrence_rows([(window, found, capacity)], starts_at, ends_at)
    ]
