"""CSV exports (issue 17): every row the API has, its number formats, and no cell
a spreadsheet would run as a formula (OWASP: = + - @ tab CR)."""

import csv
import io
from datetime import UTC, datetime

import pytest
import time_machine

from billing import exports
from tests.api.conftest import client_for
from tests.billing.ledger import meter, workload

NOW = datetime(2026, 11, 10, 12, 30, tzinfo=UTC)
HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)
HOSTILE = ['=HYPERLINK("http://evil","x")', "=cmd|' /C calc'!A0", "+1+cmd", "-2+3", "@SUM(A1)"]


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(NOW, tick=False):
        yield


def rows_of(response):
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_owner_kinds_and_names_cannot_run_in_a_spreadsheet(client, alice, vision, h100):
    meter(
        HOUR,
        teams={(vision, h100): (3600 * len(HOSTILE), 0, 3600 * len(HOSTILE), 0)},
        workloads={
            (vision, "vision", text, text, h100): workload(3600, 0, 3600) for text in HOSTILE
        },
    )
    client.force_login(alice)
    rows = rows_of(client.get("/billing/teams/vision/", {"export": "workloads"}))
    assert sorted(row["name"] for row in rows) == sorted("'" + text for text in HOSTILE)
    assert sorted(row["kind"] for row in rows) == sorted("'" + text for text in HOSTILE)
    for row in rows:
        assert not row["name"].startswith(exports.FORMULA_STARTS)


def test_the_workloads_csv_holds_every_workload_as_the_api_prints_it(client, alice, vision, h100):
    # 60 workloads, one of them 67.2 GPU-hours: a division the database leaves long.
    loads = {
        (vision, "vision", "Job", f"job-{n:02d}", h100): workload(n * 60 + 60, 0, n * 60 + 60)
        for n in range(59)
    }
    loads[vision, "vision", "Job", "long", h100] = workload(241920, 0, 241920)
    total = sum(load.allocated for load in loads.values())
    meter(HOUR, teams={(vision, h100): (total, 0, total, 0)}, workloads=loads)
    client.force_login(alice)
    rows = rows_of(client.get("/billing/teams/vision/", {"export": "workloads"}))
    api = client_for(alice).get(
        "/api/v1/billing/usage/", {"group_by": "workload", "month": "2026-11"}
    )
    assert api.status_code == 200, api.content
    results = api.json()["results"]
    assert len(rows) == len(results) == 60
    by_name = {row["name"]: row for row in rows}
    assert by_name["long"]["allocated_gpu_hours"] == "67.2000"
    for result in results:
        row = by_name[result["name"]]
        for key in ("allocated_gpu_hours", "idle_gpu_hours", "idle_cost", "cost"):
            assert row[key] == result[key], (key, row, result)


def test_the_admin_exports_escape_text_and_keep_negative_numbers(client, admin_user, vision, h100):
    meter(HOUR, teams={(vision, h100): (3600, 0, 3600, 0)})
    client.force_login(admin_user)
    teams = rows_of(client.get("/billing/admin/", {"export": "teams", "month": "2026-11"}))
    assert [row["slug"] for row in teams] == ["vision"]
    totals = rows_of(client.get("/billing/admin/", {"export": "totals", "month": "2026-11"}))
    assert {row["line"] for row in totals} >= {"capacity_gpu_hours"}


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@x", "'@x"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("train", "train"),
        ("a=b", "a=b"),
    ],
)
def test_a_text_cell_is_escaped_by_owasps_rule(text, written):
    assert exports.cell("name", text) == written


def test_figures_are_numbers_not_text():
    from decimal import Decimal

    assert str(exports.cell("credit", Decimal("-1.005"))) == "-1.00"
    assert str(exports.cell("allocated_gpu_hours", Decimal("67.2000000000000"))) == "67.2000"
