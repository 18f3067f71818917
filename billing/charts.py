"""Chart geometry for server-side SVG (templates/billing/_*_chart.html).

Pure functions: plain numbers in, coordinates out. Each series has a fill
pattern as well as a colour (readable without colour), and every bar and
point carries its value for a <title> tooltip and the table beside it.
"""

from dataclasses import dataclass, field

from teams import formats

WIDTH, HEIGHT = 720, 280
# Room for the labels at a phone's size too: there the chart is scaled to the screen
# (about half size) and its text drawn twice as large (static/css/portal.css), so
# the unit sits above the plot, right of the ticks, and the day labels well below it.
LEFT, RIGHT, TOP, BOTTOM = 84, 12, 30, 70
X_LABEL_BELOW, X_NAME_BELOW = 34, 64
# A bar is never wider than this (a day of a month is 15): one or two rows do not
# fill the plot as if they were one wide block.
MAX_BAR_WIDTH = 40

# series key -> (label, pattern id, colour); patterns are defined once in the SVG.
STACK_SERIES = [
    ("active_gpu_hours", "Active", "solid", "#2f6f4f"),
    ("idle_gpu_hours", "Idle", "hatch", "#c0392b"),
    ("unmetered_gpu_hours", "Unmetered", "dots", "#7f8c8d"),
    ("reserved_unallocated_gpu_hours", "Reserved but unallocated", "cross", "#2c5aa0"),
]


def nice_max(value):
    """A round axis maximum at or above `value`."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def ticks(maximum, count=None):
    """Gridline values from 0 to `maximum`: four steps, or five where four would not
    be round (5 in steps of 1, not of 1.25 labelled "1.2")."""
    if count is None:
        count = next(
            (n for n in (4, 5) if abs(maximum * 10 / n - round(maximum * 10 / n)) < 1e-9), 4
        )
    return [maximum * i / count for i in range(count + 1)]


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_width: int = WIDTH - LEFT - RIGHT
    plot_height: int = HEIGHT - TOP - BOTTOM
    y_ticks: list = field(default_factory=list)  # [(y, label)]
    # [(x, label, minor)]: minor labels (every other one) give way on a phone
    x_labels: list = field(default_factory=list)
    bars: list = field(default_factory=list)  # [{x, y, width, height, pattern, colour, title}]
    lines: list = field(default_factory=list)  # [{points, label, dash}]
    legend: list = field(default_factory=list)  # [{label, swatch, colour} or {label, dash}]
    points: list = field(default_factory=list)  # [{x, y, title}]: hover and focus targets
    table: dict = field(default_factory=dict)  # {head, rows}: the figures as text
    unit: str = ""
    x_name: str = ""
    x_label_below: int = X_LABEL_BELOW
    x_name_below: int = X_NAME_BELOW

    @property
    def bottom(self):
        return self.top + self.plot_height

    def label_x(self, x, label):
        """A label under `x`: every other one minor (a phone hides those); one at the
        plot's right edge ends there, not half past the chart's."""
        at_edge = x >= self.left + self.plot_width - 1
        anchor = "end" if at_edge else "middle"
        self.x_labels.append((x, label, len(self.x_labels) % 2 == 1, anchor))

    def y_of(self, value, maximum):
        return self.top + self.plot_height * (1 - float(value) / float(maximum))

    def set_y_axis(self, maximum, unit):
        self.unit = unit
        self.y_ticks = [(self.y_of(t, maximum), formats.gpu_hours(t)) for t in ticks(maximum)]


def _every(count, wanted=10):
    return max(1, -(-count // wanted))


def stacked_bars(
    rows,
    label_key,
    series=STACK_SERIES,
    unit="GPU-hours",
    x_name="Day",
    show=formats.gpu_hours,
    width=WIDTH,
    partial=None,
):
    """A stacked bar per row (e.g. per day), one segment per series. Every row has
    its slot (give the days without figures as rows too, so that a bar stands at
    its date); the table lists the rows with figures. `show` formats a value
    (default: as GPU-hours, the unit beside it in titles); a negative one is in
    the table and draws nothing. A narrower `width` (a few bars) fits a phone whole.
    `partial`: (index, words) of a row not whole yet (today's day), drawn as partial."""
    titled = show if show is not formats.gpu_hours else lambda v: f"{show(v)} {unit}"
    chart = Chart(
        width=width,
        plot_width=width - LEFT - RIGHT,
        legend=[
            {"label": label, "swatch": pattern, "colour": colour}
            for _, label, pattern, colour in series
        ],
        x_name=x_name,
        table=_table(
            [x_name, *(f"{label} ({unit})" for _, label, _, _ in series)],
            [
                [str(row[label_key]), *(show(row.get(key) or 0) for key, *_ in series)]
                for row in rows
                if any(row.get(key) for key, *_ in series)
            ],
        ),
    )
    totals = [sum(max(float(row.get(key) or 0), 0) for key, *_ in series) for row in rows]
    maximum = nice_max(max(totals, default=0))
    chart.set_y_axis(maximum, unit)
    if not rows:
        return chart
    _mark_partial(chart, partial, [str(row[label_key]) for row in rows])
    slot = chart.plot_width / len(rows)
    width = min(max(slot * 0.7, 1), MAX_BAR_WIDTH)
    every = _every(len(rows))
    for index, row in enumerate(rows):
        x = chart.left + slot * index + (slot - width) / 2
        base = 0.0
        for key, label, pattern, colour in series:
            value = float(row.get(key) or 0)
            if value <= 0:
                continue
            top = chart.y_of(base + value, maximum)
            bottom = chart.y_of(base, maximum)
            chart.bars.append(
                {
                    "x": x,
                    "y": top,
                    "width": width,
                    "height": max(bottom - top, 0.5),
                    "pattern": pattern,
                    "colour": colour,
                    "title": f"{row[label_key]}: {label} {titled(row[key])}"
                    + _so_far(partial, index),
                    "partial": _so_far(partial, index) != "",
                }
            )
            base += value
        if index % every == 0:
            chart.label_x(x + width / 2, str(row[label_key]))
    return chart


def line_chart(labels, lines, unit, maximum=None, x_name="Day", show=None, partial=None):
    """One polyline per entry of `lines`: {"label", "values", "dash"}; a point
    with its exact value (hover, focus) at each of up to 100 labels. `show`
    formats a value for titles and the table (default: as GPU-hours). `partial`:
    (index, words) of a label whose figures are not whole yet (today's day): its
    points stand apart, hollow, and no line falls to them."""
    show = show or (lambda value: f"{formats.gpu_hours(value)} {unit}")
    chart = Chart(
        legend=[{"label": line["label"], "dash": line.get("dash", "")} for line in lines],
        x_name=x_name,
        table=_table(
            [x_name, *(line["label"] for line in lines)],
            [
                [str(label), *("" if v[i] is None else show(v[i]) for v in values)]
                for values in [[line["values"] for line in lines]]
                for i, label in enumerate(labels)
                if any(v[i] is not None for v in values)
            ],
        ),
    )
    peak = max((float(v) for line in lines for v in line["values"] if v is not None), default=0)
    maximum = maximum or nice_max(peak)
    chart.set_y_axis(maximum, unit)
    count = len(labels)
    if not count:
        return chart
    _mark_partial(chart, partial, labels)
    slot = chart.plot_width / max(count - 1, 1)
    every = _every(count)
    for index, label in enumerate(labels):
        if index % every == 0:
            chart.label_x(chart.left + slot * index, str(label))
    for line in lines:
        points = [
            f"{chart.left + slot * i:.1f},{chart.y_of(min(float(v), maximum), maximum):.1f}"
            for i, v in enumerate(line["values"])
            if v is not None and not _so_far(partial, i)
        ]
        chart.lines.append(
            {"points": " ".join(points), "label": line["label"], "dash": line.get("dash", "")}
        )
        if count > 100:
            continue
        for i, value in enumerate(line["values"]):
            if value is not None:
                chart.points.append(
                    {
                        "x": chart.left + slot * i,
                        "y": chart.y_of(min(float(value), maximum), maximum),
                        "title": f"{x_name} {labels[i]}: {line['label']} {show(value)}"
                        + _so_far(partial, i),
                        "partial": _so_far(partial, i) != "",
                    }
                )
    return chart


def _so_far(partial, index):
    """The words a partial slot's titles end with ("" for a whole one)."""
    return f" so far ({partial[1]})" if partial and partial[0] == index else ""


def _mark_partial(chart, partial, labels):
    """The legend says which slot is partial: a short day is not a fall."""
    if partial and partial[0] < len(labels):
        chart.legend.append(
            {
                "label": f"{labels[partial[0]]} so far ({partial[1]}): not a whole day",
                "partial": True,
            }
        )


def _table(head, rows):
    """The figures a chart draws, as rows of text for the table beside it."""
    return {"head": head, "rows": rows}


# --- heat strips: a row per workload, time across, colour by engine activity ---

# band -> (label, pattern id, colour). Idle and unmetered have patterns of their
# own, the active bands darken with activity: readable in greyscale and never
# the colour of "not running" (nothing is drawn where nothing ran).
HEAT_BANDS = {
    "idle": ("Idle (held, below the threshold)", "idle", "#c0392b"),
    "low": ("Active, under 25 %", "low", "#b7dfc4"),
    "mid": ("25–50 %", "mid", "#6cbf8a"),
    "high": ("50–75 %", "high", "#2f8f57"),
    "full": ("75–100 %", "full", "#145a32"),
    "unmetered": ("Held, not metered", "unmetered", "#7f8c8d"),
    "credited": ("Idle, credited back (lost to a spot reclaim or an XID)", "credited", "#6c3483"),
}


@dataclass
class Slot:
    """What one workload did in one slot (an hour or a minute)."""

    gpus: int = 0
    active: int = 0  # GPU-seconds at or above the threshold
    idle: int = 0  # GPU-seconds below it
    unmetered: int = 0
    activity: float | None = None  # mean engine activity, 0-1
    # Idle GPU-seconds of runs credited back (billing.models.idle_figure):
    # never in `idle`, never drawn as idle.
    credited: int = 0

    def band(self, threshold):
        metered = self.active + self.idle
        if self.credited and self.credited >= metered:
            return "credited"
        if not metered or self.activity is None:
            return "unmetered"
        if self.idle > self.active or self.activity < threshold:
            return "idle"
        return ("low", "mid", "high", "full")[min(int(self.activity * 4), 3)]


def heat_runs(slots, count, label_of, threshold):
    """One strip: consecutive slots of one band merged into a run, each with
    its span in % of the width and the exact figures of the run as its title.

    `slots` is {index: Slot}; `label_of(index)` names a slot's start (and the
    end of the one before).
    """
    runs = []
    for index in sorted(slots):
        slot = slots[index]
        band = slot.band(threshold)
        last = runs[-1] if runs else None
        if last and last["band"] == band and last["end"] == index:
            last["end"] = index + 1
            last["slots"].append(slot)
        else:
            runs.append({"band": band, "start": index, "end": index + 1, "slots": [slot]})
    for run in runs:
        slots_of_run = run.pop("slots")
        metered = sum(s.active + s.idle for s in slots_of_run)
        weighted = sum((s.activity or 0) * (s.active + s.idle) for s in slots_of_run)
        held = sum(s.active + s.idle + s.unmetered + s.credited for s in slots_of_run)
        idle = sum(s.idle for s in slots_of_run)
        credited = sum(s.credited for s in slots_of_run)
        gpus = sorted({s.gpus for s in slots_of_run})
        run["gpus"] = f"{gpus[0]}" if len(gpus) == 1 else f"{gpus[0]}–{gpus[-1]}"
        run["activity"] = None if not metered else round(weighted / metered * 100, 1)
        run["held"] = held / 3600
        run["idle"] = idle / 3600
        run["from"] = label_of(run["start"])
        run["to"] = label_of(run["end"])
        run["x"] = run["start"] * 100 / count
        run["width"] = (run["end"] - run["start"]) * 100 / count
        label, pattern, colour = HEAT_BANDS[run["band"]]
        run["pattern"], run["colour"] = pattern, colour
        activity = "not metered" if run["activity"] is None else f"{run['activity']:g} % active"
        run["title"] = (
            f"{run['from']}–{run['to']}: {run['gpus']} GPU{'s' if gpus[-1] != 1 else ''}, "
            f"{activity}, {formats.gpu_hours(run['idle'])} of "
            f"{formats.gpu_hours(run['held'])} GPU-hours idle"
        )
        if credited:
            run["title"] += f", {formats.gpu_hours(credited / 3600)} idle credited back"
    return runs


def sparkline(values, labels, unit):
    """A small trend: points in a 100 x 24 box, each with its exact value."""
    numbers = [float(v or 0) for v in values]
    peak = max(numbers, default=0) or 1
    step = 100 / max(len(numbers) - 1, 1)
    points = [
        {
            "x": round(i * step, 1),
            "y": round(22 - 20 * v / peak, 1),
            "title": f"{label}: {formats.money(value) if unit == 'money' else value}",
        }
        for i, (v, value, label) in enumerate(zip(numbers, values, labels, strict=True))
    ]
    return {
        "points": points,
        "polyline": " ".join(f"{p['x']},{p['y']}" for p in points),
        "peak": max(values, default=0),  # its scale: from 0 to this
    }
