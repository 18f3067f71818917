"""A month of the demo's history (`kubesim history` of `billing.demo.demo_workload`
over November, its exact answer written to the ledger hour by hour through
`write_hour`, with seed_demo's catalog and quota): the fleet's cost and its four
parts add up to the cent in the database, the API and the page, for the month
and for any period within it; OpenCost's view shares out the same total."""

import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core.management import call_command

from billing import fleet, queries
from billing.models import FlavorHour
from cluster.models import Flavor
from gpu_requests import actions as quota_actions
from teams.models import Team
from tests.api.conftest import client_for
from tests.billing.ledger import meter
from tests.billing.test_demo_plan import demo_history

START, END = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
PARTS = ("used", "idle_reserved", "outside_teams", "unreserved")
# The demo cluster's node pools and the catalog's flavors they serve (kubesim/clusters/demo.yaml).
FLAVOR_OF_POOL = {
    "gpu-h100": "h100",
    "gpu-a100": "a100",
    "gpu-a100-mig3g": "a100-3g40",
    "gpu-l4": "l4",
}


@pytest.fixture(scope="module")
def demo_answer(tmp_path_factory):
    """The exact answer of the demo's November, sampled hourly (minutes would be
    gigabytes of text for the same totals)."""
    rows, _ = demo_history(tmp_path_factory.mktemp("demo-month"), START, END, step=3600)
    return rows


@pytest.fixture
def demo_month(db, demo_answer):
    """seed_demo at the month's start (its quota runs from then for 30 days: speech's
    L4s never used), and every hour of November metered from the answer."""
    with time_machine.travel(START, tick=False):
        call_command("seed_demo", stdout=io.StringIO())
        quota_actions.advance_lifecycle()
    teams = {team.slug: team for team in Team.objects.all()}
    flavors = {flavor.slug: flavor for flavor in Flavor.objects.all()}
    by_hour = {}
    for row in demo_answer:
        hour = datetime.fromisoformat(row["hour"].replace("Z", "+00:00"))
        flavor = flavors[FLAVOR_OF_POOL[row["node"].rsplit("-", 1)[0]]]
        figures = by_hour.setdefault(hour, {}).setdefault(
            (teams[row["namespace"]], flavor), [0, 0, 0, 0]
        )
        for index, key in enumerate(
            ("gpu_minutes", "busy_gpu_minutes", "idle_gpu_minutes", "unobserved_gpu_minutes")
        ):
            figures[index] += row[key] * 60
    hour = START
    while hour < END:
        meter(hour, teams={key: tuple(value) for key, value in by_hour.get(hour, {}).items()})
        hour += timedelta(hours=1)
    return flavors


def adds_up(figures):
    return sum(Decimal(figures[part]) for part in PARTS) == Decimal(figures["fleet_cost"])


def printed(page, element_id):
    match = re.search(rf'id="{element_id}">(-?[\d,]+\.\d\d) USD', page)
    assert match, element_id
    return Decimal(match.group(1).replace(",", ""))


def test_a_month_of_the_demo_adds_up_everywhere(demo_month, client, settings):
    admin = get_user_model().objects.get(username="admin")
    assert FlavorHour.objects.filter(hour__gte=START, hour__lt=END).count() == 720 * 6
    # The database: every row's seconds, and the month's exact money.
    for row in FlavorHour.objects.all():
        held = (
            row.team_allocated_seconds
            + row.team_reserved_unallocated_seconds
            + row.other_allocated_seconds
            + row.unreserved_seconds
            + row.batch_set_aside_unused_seconds
        )
        assert held == row.capacity_seconds
    for row in queries.fleet_cost(START, END):
        assert sum(row[part] for part in PARTS) == row["fleet_cost"]

    # The API: every level adds up, the teams' shares make the first two parts.
    api = client_for(admin)
    body = api.get("/api/v1/fleet-cost/", {"month": "2026-11"}).json()
    assert adds_up(body) and Decimal(body["used"]) > 0 and Decimal(body["idle_reserved"]) > 0
    (cluster,) = body["clusters"]
    assert adds_up(cluster) and cluster["cluster"] == settings.PORTAL_CLUSTER_NAME
    for flavor in cluster["flavors"]:
        assert adds_up(flavor), flavor
        for part in ("used", "idle_reserved"):
            assert sum(Decimal(team[part]) for team in flavor["teams"]) == Decimal(flavor[part])
    assert sum(Decimal(flavor["fleet_cost"]) for flavor in cluster["flavors"]) == Decimal(
        body["fleet_cost"]
    )
    teams = {team["team"]: team for team in body["teams"]}
    assert Decimal(teams["speech"]["used"]) == 0 < Decimal(teams["speech"]["idle_reserved"])
    # The fleet's cost is the admin page's capacity cost, to the cent.
    client.force_login(admin)
    capacity = client.get("/billing/admin/", {"month": "2026-11"}).context["totals"]
    assert capacity["capacity_cost"].quantize(Decimal("0.01")) == Decimal(body["fleet_cost"])

    # The page prints the same figures, and they add up.
    page = client.get("/billing/fleet/", {"month": "2026-11"}).content.decode()
    ids = {"fleet_cost": "fleet-cost", **{part: part.replace("_", "-") for part in PARTS}}
    shown = {key: printed(page, element_id) for key, element_id in ids.items()}
    assert shown == {key: Decimal(body[key]) for key in ids} and adds_up(shown)

    # Any period: a week, a day, an hour, each with its own cents.
    for start, hours in ((datetime(2026, 11, 2, tzinfo=UTC), 7 * 24), (START, 24), (START, 1)):
        period = {"from": start.isoformat(), "to": (start + timedelta(hours=hours)).isoformat()}
        figures = api.get("/api/v1/fleet-cost/", period).json()
        assert adds_up(figures) and all(adds_up(f) for f in figures["clusters"][0]["flavors"])

    # OpenCost's rule shares out the same fleet's cost.
    view = fleet.opencost(START, END)[settings.PORTAL_CLUSTER_NAME]
    total = sum(party["total"] for party in view["parties"].values()) + view["unshared"]
    assert total == Decimal(body["fleet_cost"])
    assert "speech" not in view["parties"]  # it requested nothing: OpenCost charges it nothing
