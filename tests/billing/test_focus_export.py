"""The FOCUS 1.3 export (GET /api/v1/exports/focus): a file that validates against
the spec's columns (billing/focus.py holds them as data, with the spec files
cited), whose BilledCost per team is the team's spend from the ledger functions
to the cent, idle rows the idle cost and credit rows the credit; who may have
it; and every bad parameter a 400 naming it. November is a past month with a
spot reclaim and an XID failure, metered from a real Prometheus; December the
current month (tests/billing/lost_month.py)."""

import csv
import io
import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest

from billing import focus, queries
from billing.models import TeamUsage
from billing.reports import Month
from teams.models import Team
from tests.api.conftest import client_for
from tests.billing.ledger import meter, workload
from tests.billing.lost_month import DEC9, lost_month, prometheus_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.prometheus

URL = "/api/v1/exports/focus"
CENT = Decimal("0.01")
DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
# The spec's NumericFormat: an optional minus, digits, an optional fraction; no
# exponent, no thousands separator.
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@pytest.fixture
def two_teams(lost_month, nlp):  # noqa: F811
    """nlp in December too, so that a team's rows are told from the others'."""
    h100 = lost_month["h100"]
    meter(
        DEC9.replace(hour=11),
        teams={(nlp, h100): (3 * 3600, 3600, 2 * 3600, 0)},
        workloads={(nlp, "nlp", "Job", "eval", h100): workload(3 * 3600, 3600, 2 * 3600)},
    )
    return lost_month


def focus_rows(user, **query):
    response = client_for(user).get(URL, query)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def invalid(column, value):
    """What is wrong with `value` in `column` (the spec's type, nullability and
    allowed values, as billing/focus.py has them), or None."""
    if value == "":
        return None if column.nullable else "null in a column that allows none"
    if column.allowed and value not in column.allowed:
        return f"not one of the allowed values {column.allowed}"
    if column.type == "Decimal" and not NUMBER.match(value):
        return "not a decimal in the spec's NumericFormat"
    if column.type == "DateTime" and not DATETIME.match(value):
        return "not a UTC date-time in the spec's DateTimeFormat"
    if column.type == "JSON":
        try:
            if not isinstance(json.loads(value), dict):
                return "not a JSON object"
        except ValueError:
            return "not JSON"
    return None


def spec_errors(rows):
    """Every departure from the spec in `rows`, as (row number, column, why)."""
    columns = {column.name: column for column in focus.COLUMNS}
    errors = []
    for number, row in enumerate(rows):
        for name, value in row.items():
            if name.startswith("x_"):
                continue  # a custom column, as the spec names them
            why = invalid(columns[name], value) if name in columns else "not a FOCUS column"
            if why:
                errors.append((number, name, why))
        # Requirements between columns (consumedquantity.md, pricingunit.md,
        # listunitprice.md, chargeperiodstart.md, billingperiodstart.md,
        # allocatedmethodid.md, hostprovidername.md).
        usage = row["ChargeCategory"] == "Usage"
        checks = {
            "ConsumedQuantity null unless Usage": (row["ConsumedQuantity"] != "") == usage,
            "ConsumedUnit null exactly when ConsumedQuantity is": (row["ConsumedUnit"] == "")
            == (row["ConsumedQuantity"] == ""),
            "PricingUnit null exactly when PricingQuantity is": (row["PricingUnit"] == "")
            == (row["PricingQuantity"] == ""),
            "a Usage row has a SKU price": not usage
            or all(row[key] for key in ("SkuPriceId", "ListUnitPrice", "PricingQuantity")),
            "ListUnitPrice null exactly when SkuPriceId is": (row["ListUnitPrice"] == "")
            == (row["SkuPriceId"] == ""),
            "ListUnitPrice not negative": not row["ListUnitPrice"]
            or Decimal(row["ListUnitPrice"]) >= 0,
            "ListCost is ListUnitPrice x PricingQuantity": not row["ListUnitPrice"]
            or abs(
                Decimal(row["ListCost"])
                - Decimal(row["ListUnitPrice"]) * Decimal(row["PricingQuantity"])
            )
            < Decimal("0.0001"),
            "the charge period ends after it starts": row["ChargePeriodStart"]
            < row["ChargePeriodEnd"],
            "the charge period lies in the billing period": row["BillingPeriodStart"]
            <= row["ChargePeriodStart"]
            and row["ChargePeriodEnd"] <= row["BillingPeriodEnd"],
            "an allocated charge names its allocated resource": (row["AllocatedMethodId"] == "")
            == (row["AllocatedResourceId"] == ""),
        }
        errors += [(number, "-", rule) for rule, holds in checks.items() if not holds]
    return errors


def by_team(rows, kind=None):
    """{team: sum of BilledCost, to the cent} over rows of `kind` (x_GpuTime) or all."""
    sums = defaultdict(Decimal)
    for row in rows:
        if kind is None or row[focus.GPU_TIME] == kind:
            sums[row["SubAccountId"]] += Decimal(row["BilledCost"])
    return {team: total.quantize(CENT, ROUND_HALF_UP) for team, total in sums.items()}


def ledger(month, figure):
    """{team: the ledger function's `figure` for the month, to the cent}."""
    rows = TeamUsage.objects.filter(hour__gte=month.start, hour__lt=month.end)
    return {
        row["team__slug"]: Decimal(row[figure]).quantize(CENT, ROUND_HALF_UP)
        for row in queries.team_usage(rows, "team")
        if row[figure]
    }


@pytest.mark.parametrize("granularity", ["day", "hour"])
@pytest.mark.parametrize("month", ["2026-11", "2026-12"])
def test_the_file_validates_against_the_spec(two_teams, admin_user, month, granularity):
    rows = focus_rows(admin_user, month=month, granularity=granularity)
    assert rows
    header = set(rows[0])
    mandatory = {column.name for column in focus.COLUMNS if column.level == "Mandatory"}
    assert mandatory <= header, mandatory - header
    assert {"ServiceProviderName", "HostProviderName", "AllocatedMethodId"} <= header
    assert spec_errors(rows) == []
    length = timedelta(days=1) if granularity == "day" else timedelta(hours=1)
    for row in rows:
        start = datetime.fromisoformat(row["ChargePeriodStart"])
        assert datetime.fromisoformat(row["ChargePeriodEnd"]) - start == length
        assert json.loads(row["Tags"]) == {
            "portal/cluster": "gpu-cluster",
            "portal/namespace": row["SubAccountId"],
            "portal/flavor": row["SkuId"],
        }


@pytest.mark.parametrize("granularity", ["day", "hour"])
@pytest.mark.parametrize("month", ["2026-11", "2026-12"])
def test_billed_cost_is_each_teams_spend_idle_and_credit_to_the_cent(
    two_teams, admin_user, month, granularity
):
    rows = focus_rows(admin_user, month=month, granularity=granularity)
    period = Month.parse(month)
    assert by_team(rows) == ledger(period, "cost")
    assert by_team(rows, focus.IDLE) == ledger(period, "idle_cost")
    assert by_team(rows, focus.LOST) == {
        team: -credit for team, credit in ledger(period, "credit").items()
    }
    credits = [row for row in rows if row[focus.GPU_TIME] == focus.LOST]
    assert {row["ChargeCategory"] for row in credits} <= {"Credit"}
    assert all(Decimal(row["BilledCost"]) < 0 for row in credits)


def test_november_in_figures(two_teams, admin_user):
    """The month of tests/billing/test_figures_agree.py, row by row: the reclaimed
    sweep (3 L4-hours at 0.50, spot) and the XID (1 H100-hour at 4.00) are credited
    on the days they ran; the notebook's idle H100-hour is idle."""
    rows = focus_rows(admin_user, month="2026-11")
    assert by_team(rows) == {"vision": Decimal("4.00")}
    assert by_team(rows, focus.IDLE) == {"vision": Decimal("4.00")}
    assert by_team(rows, focus.LOST) == {"vision": Decimal("-5.50")}
    credits = {
        (row["ChargePeriodStart"], row["SkuId"]): row["BilledCost"]
        for row in rows
        if row["ChargeCategory"] == "Credit"
    }
    assert credits == {
        ("2026-11-03T00:00:00Z", "h100"): "-4.000000",
        ("2026-11-03T00:00:00Z", "l4"): "-0.750000",
        ("2026-11-04T00:00:00Z", "l4"): "-0.750000",
    }
    spot = {row["SkuPriceId"] for row in rows if row["SkuId"] == "l4"} - {""}
    assert spot == {"l4@x0.5"}
    idle = [row for row in rows if row[focus.GPU_TIME] == focus.IDLE]
    assert [(row["SkuId"], row["ConsumedQuantity"], row["ConsumedUnit"]) for row in idle] == [
        ("h100", "1.000000", "GPU-Hours")
    ]
    assert {row["AllocatedMethodId"] for row in rows if row["ChargeCategory"] == "Usage"} == {
        focus.BY_REQUESTS
    }
    assert {row["AllocatedResourceName"] for row in rows} <= {"vision", ""}


def test_reserved_unallocated_time_is_its_own_rows_when_charged_by_reservation(
    settings, admin_user, vision, catalog
):
    settings.PORTAL_BILLING_CHARGE = "reservation"
    h100 = catalog["h100"]
    hour = datetime(2026, 11, 10, 9, tzinfo=UTC)
    meter(hour, teams={(vision, h100): (3600, 3600, 0, 0)})
    # Quota of 3 H100s held all hour, 1 of them allocated.
    TeamUsage.objects.filter(team=vision).update(
        reserved_seconds=3 * 3600, reserved_unallocated_seconds=2 * 3600
    )
    rows = focus_rows(admin_user, month="2026-11")
    assert spec_errors(rows) == []
    reserved = [row for row in rows if row[focus.GPU_TIME] == focus.RESERVED]
    assert [(row["PricingQuantity"], row["BilledCost"]) for row in reserved] == [
        ("2.000000", "8.000000")
    ]
    assert reserved[0]["AllocatedMethodId"] == focus.BY_QUOTA
    assert by_team(rows) == ledger(Month.parse("2026-11"), "cost") == {"vision": Decimal("12.00")}


def test_a_period_and_one_team(two_teams, admin_user, carol):
    rows = focus_rows(
        admin_user, team="vision", **{"from": "2026-11-03T23:00:00Z", "to": "2026-11-04T01:00Z"}
    )
    assert {row["SubAccountId"] for row in rows} == {"vision"}
    assert min(row["ChargePeriodStart"] for row in rows) == "2026-11-03T23:00:00Z"
    assert max(row["ChargePeriodEnd"] for row in rows) == "2026-11-04T01:00:00Z"
    assert spec_errors(rows) == []
    # A manager of the team gets the same file.
    assert (
        focus_rows(carol, team="vision", **{"from": "2026-11-03T23:00Z", "to": "2026-11-04T01:00Z"})
        == rows
    )


def test_admins_get_every_team_and_managers_their_own(two_teams, admin_user, carol):
    assert {row["SubAccountId"] for row in focus_rows(admin_user, month="2026-12")} == {
        "vision",
        "nlp",
    }
    assert {row["SubAccountId"] for row in focus_rows(carol, month="2026-12")} == {"vision"}


@pytest.mark.parametrize(
    ("persona", "query", "status"),
    [
        ("carol", {"team": "nlp"}, 403),  # a manager, of another team
        ("carol", {"team": "no-such-team"}, 403),
        ("alice", {}, 403),  # a member, not a manager
        ("alice", {"team": "vision"}, 403),
        ("charlie", {}, 403),  # in no team
        ("admin_user", {"team": "no-such-team"}, 404),
        (None, {}, 401),
    ],
)
def test_who_may_not_have_it(request, vision, nlp, persona, query, status):
    user = request.getfixturevalue(persona) if persona else None
    response = client_for(user).get(URL, {"month": "2026-11", **query})
    assert response.status_code == status, response.content


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"month": "2026-11", "period": "2026-11"}, "period"),
        ({"month": "2026-11", "group_by": "team"}, "group_by"),
        ({"month": "2026-13"}, "month"),
        ({"month": "2026-11", "granularity": "week"}, "granularity"),
        ({}, "month"),
        ({"from": "2026-11-01T00:00Z"}, "month"),
        ({"from": "2026-11-01T00:30Z", "to": "2026-11-02T00:00Z"}, "from"),
        ({"from": "2026-11-02T00:00Z", "to": "2026-11-01T00:00Z"}, "to"),
        ({"from": "yesterday", "to": "2026-11-01T00:00Z"}, "from"),
        ({"month": "2026-11", "from": "2026-11-01T00:00Z"}, "month"),
        ({"month": "2026-11", "team": "x" * 10_000}, "team"),
        ({"from": "2026-11-01T00:00+99:00", "to": "2026-11-02T00:00Z"}, "from"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(admin_user, query, field):
    response = client_for(admin_user).get(URL, query)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def test_the_spend_pages_offer_the_file(two_teams, client, admin_user, carol, alice):
    client.force_login(admin_user)
    page = client.get("/billing/admin/", {"month": "2026-11"}).content.decode()
    assert 'href="/api/v1/exports/focus?month=2026-11"' in page
    client.force_login(carol)
    page = client.get("/billing/teams/vision/", {"month": "2026-11"}).content.decode()
    assert 'href="/api/v1/exports/focus?month=2026-11&amp;team=vision"' in page
    client.force_login(alice)
    page = client.get("/billing/teams/vision/", {"month": "2026-11"}).content.decode()
    assert "/api/v1/exports/focus" not in page


def test_numbers_parse_as_decimals():
    """The validator itself: what the spec's NumericFormat refuses, it refuses."""
    decimal = next(column for column in focus.COLUMNS if column.name == "BilledCost")
    for bad in ("1e-7", "1,000.00", "0E-6", " 1"):
        assert invalid(decimal, bad), bad
    for good in ("-5.500000", "0.000000", "12"):
        assert invalid(decimal, good) is None


def test_two_queries_whatever_the_rows(two_teams, django_assert_num_queries):
    """The ledger's rows and the pools' capacity: no query per row, team or flavor."""
    teams = Team.objects.all()
    month = Month.parse("2026-11")
    with django_assert_num_queries(2):
        rows = list(focus.charges(teams, month.start, month.end, "hour"))
    assert {row["SubAccountId"] for row in rows} == {"vision"}
