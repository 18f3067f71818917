"""Chart geometry for server-side SVG (templates/billing/_*_chart.html).

Pure functions: plain numbers in, coordinates out. Each series has a fill
pattern as well as a colour (readable without colour), and every bar and
point carries its value for a <title> tooltip and the table beside it.
"""

from dataclasses import dataclass, field

from gpu_requests import formats

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 40

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


def ticks(maximum, count=4):
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
    x_labels: list = field(default_factory=list)  # [(x, label)]
    bars: list = field(default_factory=list)  # [{x, y, width, height, pattern, colour, title}]
    lines: list = field(default_factory=list)  # [{points, label, dash}]
    legend: list = field(default_factory=list)  # [{label, swatch, colour} or {label, dash}]
    unit: str = ""

    @property
    def bottom(self):
        return self.top + self.plot_height

    def y_of(self, value, maximum):
        return self.top + self.plot_height * (1 - float(value) / float(maximum))

    def set_y_axis(self, maximum, unit):
        self.unit = unit
        self.y_ticks = [(self.y_of(t, maximum), formats.gpu_hours(t)) for t in ticks(maximum)]


def _every(count, wanted=10):
    return max(1, -(-count // wanted))


def stacked_bars(rows, label_key, series=STACK_SERIES, unit="GPU-hours"):
    """A stacked bar per row (e.g. per day), one segment per series."""
    chart = Chart(
        legend=[
            {"label": label, "swatch": pattern, "colour": colour}
            for _, label, pattern, colour in series
        ]
    )
    totals = [sum(float(row.get(key) or 0) for key, *_ in series) for row in rows]
    maximum = nice_max(max(totals, default=0))
    chart.set_y_axis(maximum, unit)
    if not rows:
        return chart
    slot = chart.plot_width / len(rows)
    width = max(slot * 0.7, 1)
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
                    "title": f"{row[label_key]}: {label} {formats.gpu_hours(value)} {unit}",
                }
            )
            base += value
        if index % every == 0:
            chart.x_labels.append((x + width / 2, str(row[label_key])))
    return chart


def line_chart(labels, lines, unit, maximum=None):
    """One polyline per entry of `lines`: {"label", "values", "dash"}."""
    chart = Chart(legend=[{"label": line["label"], "dash": line.get("dash", "")} for line in lines])
    peak = max((float(v) for line in lines for v in line["values"] if v is not None), default=0)
    maximum = maximum or nice_max(peak)
    chart.set_y_axis(maximum, unit)
    count = len(labels)
    if not count:
        return chart
    slot = chart.plot_width / max(count - 1, 1)
    every = _every(count)
    for index, label in enumerate(labels):
        if index % every == 0:
            chart.x_labels.append((chart.left + slot * index, str(label)))
    for line in lines:
        points = [
            f"{chart.left + slot * i:.1f},{chart.y_of(min(float(v), maximum), maximum):.1f}"
            for i, v in enumerate(line["values"])
            if v is not None
        ]
        chart.lines.append(
            {"points": " ".join(points), "label": line["label"], "dash": line.get("dash", "")}
        )
    return chart
