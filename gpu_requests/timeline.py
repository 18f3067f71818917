"""A flavor's reservations over the next weeks as a Gantt chart, drawn server-side as SVG.

`chart(...)` is pure: plain data in (reservations, pending requests, the
flavor's capacity, the period), the geometry of every shape out; the
template `gpu_requests/_timeline.html` only writes it down. The reserved line
is `capacity.Timeline.steps`, the same figures the approval check uses.
"""

from dataclasses import dataclass, field
from datetime import timedelta

from gpu_requests import capacity

WIDTH = 1000  # viewBox units; the SVG scales to its container
LINE_HEIGHT = 120  # the reserved-GPUs area
LANE = 32  # a lane: its label's line, then its bar
BAR = 12  # a bar's height
MAX_LANES = 30  # per section; the rest are counted
LABEL_CHARS = 24  # fit half a phone's chart (a lane's label has at least half the width)


@dataclass
class Bar:
    x: float  # percent of the width, like `width`: the text inside stays unstretched
    width: float
    y: float
    label: str
    title: str
    short: str = ""  # the label on a phone, when it has to be shortened
    href: str = ""
    open_end: bool = False
    kind: str = ""  # "window": a segment of a recurring holder's row
    label_x: float = 0  # percent; the label's line is above the bar, never over one
    anchor: str = "start"


@dataclass
class Section:
    name: str
    bars: list = field(default_factory=list)
    hidden: int = 0
    y: float = 0


@dataclass
class Chart:
    flavor: object
    capacity: int
    starts_at: object
    ends_at: object
    height: float
    ticks: list  # [(x percent, label)]
    area: str  # SVG path of the reserved GPUs, in a WIDTH x LINE_HEIGHT box
    capacity_y: float
    peak: int
    sections: list
    over: bool
    width: int = WIDTH
    line_height: int = LINE_HEIGHT
    bar: int = BAR


def chart(flavor, total, held, pending, starts_at, days=28, *, label_of, link_of, lane_of=None):
    """The chart of `flavor` from `starts_at` for `days` days.

    `held`: capacity.Reservation of every holder (the line); lanes are drawn
    for those `label_of(reservation)` names (None: counted in the line only).
    `pending`: quota requests shown apart, not counted. `link_of(r)`: a bar's href.
    `lane_of(r)`: reservations with the same (not None) key share one lane, a
    segment each, named once (a batch window and its openings).
    """
    ends_at = starts_at + timedelta(days=days)
    span = (ends_at - starts_at).total_seconds()

    def x(instant):
        if instant is None or instant >= ends_at:
            return WIDTH
        return max(0.0, (instant - starts_at).total_seconds() / span * WIDTH)

    timeline = capacity.Timeline(held)
    steps = timeline.steps(starts_at, ends_at)
    peak = max([gpus for _, _, gpus in steps] + [0])
    top = max(total, peak, 1)

    def y(gpus):
        return LINE_HEIGHT - gpus / top * (LINE_HEIGHT - 10)

    points = [f"M0,{LINE_HEIGHT}"]
    for first, last, gpus in steps:
        points.append(f"L{x(first):.1f},{y(gpus):.1f} L{x(last):.1f},{y(gpus):.1f}")
    points.append(f"L{WIDTH},{LINE_HEIGHT} Z")

    sections = []
    offset = LINE_HEIGHT + 30
    for name, rows in (("Reserved", held), ("Pending, not counted", pending)):
        section = Section(name=name, y=offset)
        shown = [(r, label_of(r)) for r in sorted(rows, key=lambda r: (r.starts_at, r.pk))]
        shown = [(r, label) for r, label in shown if label is not None]
        lanes = {}  # key: [lane number, its bars], in order of first start
        for r, label in shown:
            key = (lane_of and lane_of(r)) or ("one", getattr(r, "source", ""), r.pk)
            lane, bars = lanes.setdefault(key, (len(lanes), []))
            if lane >= MAX_LANES:
                continue
            left = x(r.starts_at)
            bars.append(
                Bar(
                    x=left / WIDTH * 100,
                    width=max(x(r.ends_at) - left, 3) / WIDTH * 100,
                    y=offset + 18 + lane * LANE + LANE - BAR - 4,
                    label="" if bars else label,
                    short="" if bars else _short(label),
                    title=f"{label}: {r.starts_at:%Y-%m-%d %H:%M} → "
                    + (f"{r.ends_at:%Y-%m-%d %H:%M} UTC" if r.ends_at else "open-ended"),
                    href=link_of(r),
                    open_end=r.ends_at is None or r.ends_at > ends_at,
                    kind="" if key[0] == "one" else "window",
                )
            )
        for _, bars in lanes.values():
            if bars:
                _place_label(bars)
            section.bars.extend(bars)
        section.bars.sort(key=lambda bar: bar.y)
        section.hidden = max(len(lanes) - MAX_LANES, 0)
        lanes = min(len(lanes), MAX_LANES) or 1
        offset += 18 + lanes * LANE + (16 if section.hidden else 0) + 14
        sections.append(section)

    ticks = [
        (x(starts_at + timedelta(days=d)) / WIDTH * 100, f"{starts_at + timedelta(days=d):%d %b}")
        for d in range(0, days + 1, 7)
    ]
    return Chart(
        flavor=flavor,
        capacity=total,
        starts_at=starts_at,
        ends_at=ends_at,
        height=offset,
        ticks=ticks,
        area=" ".join(points),
        capacity_y=y(total),
        peak=peak,
        sections=sections,
        over=peak > total,
    )


def _short(label):
    return "" if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _place_label(bars):
    """A lane's label goes on the line above its bars, from where the lane starts
    when that is in the left half, else ending where it ends: either way it has half
    the chart's width, at any screen width."""
    first = bars[0]
    left, right = first.x, max(bar.x + bar.width for bar in bars)
    if left < 50:
        first.label_x, first.anchor = left, "start"
    else:
        first.label_x, first.anchor = min(right, 100), "end"
