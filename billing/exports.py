"""What the CSV exports and the API write for a figure, and cells a spreadsheet
will not run.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and some a
tab or carriage return before them) as a formula: a pod's owner kind and name,
set by any team member, could open `=HYPERLINK(...)` or `=cmd|...` on a
manager's machine. OWASP's rule is applied to every text cell: such a cell is
prefixed with `'`, which the spreadsheet shows as text. Numbers the portal
formats itself (a credit can be negative) are left as numbers.
"""

import csv
import itertools
from datetime import date, datetime

from django.http import HttpResponse, StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(text):
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def figure(key, value):
    """A ledger figure as the API and the exports print it (`str()` of this): GPU-hours
    to 4 places, money to 2, a day as its date; other values as they are."""
    if value is None:
        return None
    if isinstance(value, datetime) and key == "day":
        return value.date().isoformat()
    if isinstance(value, date | datetime):
        return value.isoformat()
    if key.endswith("hours"):
        return round(value, 4)
    if key.endswith(("cost", "credit", "budget")):
        return round(value, 2)
    return value


def cell(key, value):
    """A CSV cell: text as given (escaped), figures formatted."""
    if value is None:
        return ""
    if isinstance(value, str):
        return text_cell(value)
    return figure(key, value)


def csv_response(filename, header, rows):
    """A CSV download: `header` names the columns (and the figures' formats), `rows`
    are sequences in that order."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow([text_cell(name) for name in header])
    for row in rows:
        writer.writerow([cell(key, value) for key, value in zip(header, row, strict=True)])
    return response


class _Lines:
    """What csv.writer writes to: each row back as its line, to stream."""

    def write(self, line):
        return line


def csv_stream(filename, header, rows):
    """`csv_response` for a file too long to hold in memory: `rows` (an iterator of
    dicts keyed by `header`) are written as the client reads them."""
    writer = csv.writer(_Lines())
    lines = (writer.writerow([cell(key, row.get(key)) for key in header]) for row in rows)
    response = StreamingHttpResponse(
        itertools.chain([writer.writerow([text_cell(name) for name in header])], lines),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
