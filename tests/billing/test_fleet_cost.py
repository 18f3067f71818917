"""Where the GPU money went: the fleet's cost (every schedulable GPU x its rate)
splits into used, idle reserved, outside any team and unreserved, which add up
to it to the cent in the ledger, the API and the page. November 2026 is a
hand-computed month of two hours; OpenCost's rule is checked on its own small
case."""

import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing import fleet, queries, reports
from billing.models import FlavorHour
from cluster import actions as cluster_actions
from cluster.models import Flavor
from tests.api.conftest import client_for
from tests.billing.ledger import meter
from tests.provisioning.conftest import demo_flavors  # noqa: F401 (a fixture)

HOUR = 3600
NOVEMBER = (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
PARTS = ("used", "idle_reserved", "outside_teams", "unreserved")


@pytest.fixture
def november(vision, nlp, h100, a100, grant, alice, bob):
    """h100: 16 at 4.00, a100: 16 at 2.50. vision holds quota for 4 H100s, nlp for 2
    A100s it never uses. 10 Nov 09:00: vision's pods hold 3 H100s, nlp's 2 (over no
    quota), another namespace's 1. 11 Nov 09:00: vision holds one H100 for 1000 s,
    another namespace one for 500 s: thirds and ninths of a cent to round."""
    grant(vision, h100, 4, NOVEMBER[0], NOVEMBER[1], alice)
    grant(nlp, a100, 2, NOVEMBER[0], NOVEMBER[1], bob)
    meter(
        datetime(2026, 11, 10, 9, tzinfo=UTC),
        teams={(vision, h100): (3 * HOUR, 3 * HOUR, 0, 0), (nlp, h100): (2 * HOUR, 0, 2 * HOUR, 0)},
        other={h100: HOUR},
    )
    meter(
        datetime(2026, 11, 11, 9, tzinfo=UTC),
        teams={(vision, h100): (1000, 1000, 0, 0)},
        other={h100: 500},
    )


# Hand-computed. h100: vision used 3 h x 4 + 1000 s x 4 / 3600 = 13.1111; nlp used
# 8.00; vision idle reserved 1 h x 4 + 13400 s x 4 / 3600 = 18.8888; outside
# 4.00 + 500 s x 4 / 3600 = 4.5555; unreserved 9 h x 4 + 42700 s x 4 / 3600 =
# 83.4444; fleet 2 x 16 x 4 = 128. Rounded down they make 127.98: the two cents
# left go to the largest remainders (18.888, 4.555). a100: 2 x 16 x 2.50 = 80,
# nlp idle reserved 2 x 2 x 2.50 = 10, unreserved 70.
EXPECTED = {
    "h100": {
        "fleet_cost": "128.00",
        "used": "21.11",
        "idle_reserved": "18.89",
        "outside_teams": "4.56",
        "unreserved": "83.44",
    },
    "a100": {
        "fleet_cost": "80.00",
        "used": "0.00",
        "idle_reserved": "10.00",
        "outside_teams": "0.00",
        "unreserved": "70.00",
    },
}
TOTAL = {
    "fleet_cost": "208.00",
    "used": "21.11",
    "idle_reserved": "28.89",
    "outside_teams": "4.56",
    "unreserved": "153.44",
}
TEAMS = {"vision": ("13.11", "18.89"), "nlp": ("8.00", "10.00")}


def adds_up(figures):
    return sum(Decimal(figures[part]) for part in PARTS) == Decimal(figures["fleet_cost"])


def test_the_four_parts_add_up_in_every_ledger_row(november):
    for row in FlavorHour.objects.all():
        parts = (
            row.team_allocated_seconds
            + row.team_reserved_unallocated_seconds
            + row.other_allocated_seconds
            + row.unreserved_seconds
            + row.batch_set_aside_unused_seconds
        )
        assert parts == row.capacity_seconds
    for row in queries.fleet_cost(*NOVEMBER):
        assert sum(row[part] for part in PARTS) == row["fleet_cost"]  # exact, before rounding


def test_a_hand_computed_month_splits_to_the_cent(november, settings, django_assert_num_queries):
    split = fleet.split(*NOVEMBER)
    (cluster,) = split["clusters"]
    assert cluster["cluster"] == settings.PORTAL_CLUSTER_NAME
    by_flavor = {flavor["flavor"]: flavor for flavor in cluster["flavors"]}
    for slug, expected in EXPECTED.items():
        assert {key: str(by_flavor[slug][key]) for key in expected} == expected
    assert {key: str(split[key]) for key in TOTAL} == TOTAL
    assert {key: str(cluster[key]) for key in TOTAL} == TOTAL
    teams = {
        team["team"]: (str(team["used"]), str(team["idle_reserved"])) for team in split["teams"]
    }
    assert teams == TEAMS
    # GPU-hours: 2 x 16 H100s and 2 x 16 A100s.
    assert split["fleet_cost_gpu_hours"] == 64
    # The page's figures in a fixed number of queries, whatever the months hold.
    month = reports.Month.parse("2026-11")
    with django_assert_num_queries(2):
        fleet.page(month, fleet.months_before(month))
    # A month with nothing metered: nothing to split, nothing off by a cent.
    empty = fleet.split(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    assert empty["fleet_cost"] == 0 and empty["teams"] == []


def test_the_api_gives_the_split_per_cluster_and_flavor(november, admin_user, settings):
    response = client_for(admin_user).get("/api/v1/fleet-cost/", {"month": "2026-11"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["currency"] == "USD" and body["from"] == "2026-11-01T00:00:00+00:00"
    assert {key: body[key] for key in TOTAL} == TOTAL and adds_up(body)
    (cluster,) = body["clusters"]
    assert cluster["cluster"] == settings.PORTAL_CLUSTER_NAME and adds_up(cluster)
    flavors = {flavor["flavor"]: flavor for flavor in cluster["flavors"]}
    for slug, expected in EXPECTED.items():
        assert {key: flavors[slug][key] for key in expected} == expected
        assert adds_up(flavors[slug])
    assert flavors["h100"]["teams"] == [
        {
            "team": "nlp",
            "used": "8.00",
            "idle_reserved": "0.00",
            "gpu_hours": {"used": "2.0000", "idle_reserved": "0.0000"},
        },
        {
            "team": "vision",
            "used": "13.11",
            "idle_reserved": "18.89",
            "gpu_hours": {"used": "3.2778", "idle_reserved": "4.7222"},
        },
    ]
    assert {team["team"]: (team["used"], team["idle_reserved"]) for team in body["teams"]} == TEAMS
    assert flavors["h100"]["gpu_hours"]["fleet_cost"] == "32.0000"
    # The same split from and to the same instants.
    period = {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"}
    again = client_for(admin_user).get("/api/v1/fleet-cost/", period).json()
    assert again["clusters"] == body["clusters"]


def printed(page, element_id):
    match = re.search(rf'id="{element_id}">(-?[\d,]+\.\d\d) USD', page)
    assert match, element_id
    return Decimal(match.group(1).replace(",", ""))


def test_the_page_shows_the_same_split_and_drills_down_to_each_team(november, client, admin_user):
    client.force_login(admin_user)
    response = client.get("/billing/fleet/", {"month": "2026-11"})
    assert response.status_code == 200
    page = response.content.decode()
    ids = {"fleet_cost": "fleet-cost", **{part: part.replace("_", "-") for part in PARTS}}
    shown = {key: str(printed(page, element_id)) for key, element_id in ids.items()}
    assert shown == TOTAL and adds_up(shown)
    assert "gpu-cluster · H100 80GB" in page
    assert '<a href="/billing/teams/vision/?month=2026-11">Vision</a>' in page
    assert "32.00 USD" in page  # vision's used and idle reserved together (13.11 + 18.89)
    # The chart: a bar per month, November's four parts in its title and table.
    chart = response.context["fleet"]["chart"]
    assert [label for _, label, *_ in chart.x_labels][-1] == "Nov 2026"
    titles = [bar["title"] for bar in chart.bars]
    assert "Nov 2026: Reserved by teams, used 21.11 USD" in titles
    assert "Nov 2026: Unreserved, idle 153.44 USD" in titles
    # The admin spend page leads here.
    admin = client.get("/billing/admin/", {"month": "2026-11"}).content.decode()
    assert 'href="/billing/fleet/?month=2026-11" id="fleet-link"' in admin


def test_members_are_refused_the_page_and_the_api(november, client, alice):
    client.force_login(alice)
    assert client.get("/billing/fleet/", {"month": "2026-11"}).status_code == 403
    response = client_for(alice).get("/api/v1/fleet-cost/", {"month": "2026-11"})
    assert response.status_code == 403
    assert "Only platform admins" in response.json()["detail"]
    assert client_for().get("/api/v1/fleet-cost/").status_code in (401, 403)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"month": "2026-13"}, "month"),
        ({"month": "November"}, "month"),
        ({"period": "2026-11"}, "period"),
        ({"month": "2026-11", "team": "vision"}, "team"),
        ({"from": "2026-11-01T00:00Z"}, "to"),
        ({"to": "2026-11-01T00:00Z"}, "from"),
        ({"from": "yesterday", "to": "2026-11-01T00:00Z"}, "from"),
        ({"from": "2026-11-02T00:00Z", "to": "2026-11-01T00:00Z"}, "to"),
        ({"month": "2026-11", "from": "2026-11-01T00:00Z", "to": "2026-11-02T00:00Z"}, "month"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(db, admin_user, query, field):
    response = client_for(admin_user).get("/api/v1/fleet-cost/", query)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def test_a_bad_month_on_the_page_is_a_readable_error(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/billing/fleet/", {"month": "2026-13"})
    assert response.status_code == 404  # as on the other Spend pages (billing.views._month)
    assert "<h1>Not found</h1>" in response.content.decode()


def test_cents_are_shared_by_the_largest_remainder():
    thirds = [Decimal(10) / 3] * 3
    assert fleet.to_cents(thirds, Decimal("10.00")) == [
        Decimal("3.34"),
        Decimal("3.33"),
        Decimal("3.33"),
    ]
    # A negative part (more promised than exists) takes its share of the cents too.
    assert fleet.to_cents([Decimal("5.005"), Decimal("-0.006"), Decimal("1")], Decimal("6.00")) == [
        Decimal("5.01"),
        Decimal("-0.01"),
        Decimal("1.00"),
    ]


def test_opencosts_rule_on_a_hand_computed_case():
    """Fleet 100; allocated (requested GPUs x hours x price): vision 30, nlp 10, the
    other namespaces 10. Idle is 100 - 50 = 50, shared by the allocated cost's
    weight: vision 3/5 of it, nlp and the rest 1/5 each."""
    parties, unshared = fleet.opencost_shares(
        Decimal(100), {"vision": Decimal(30), "nlp": Decimal(10), "outside_teams": Decimal(10)}
    )
    assert parties == {
        "vision": {
            "allocated": Decimal("30.00"),
            "idle": Decimal("30.00"),
            "total": Decimal("60.00"),
        },
        "nlp": {"allocated": Decimal("10.00"), "idle": Decimal("10.00"), "total": Decimal("20.00")},
        "outside_teams": {
            "allocated": Decimal("10.00"),
            "idle": Decimal("10.00"),
            "total": Decimal("20.00"),
        },
    }
    assert unshared == 0
    # Thirds: the idle cents add up to the fleet's too.
    parties, _ = fleet.opencost_shares(Decimal(10), {p: Decimal(1) for p in "abc"})
    assert sorted(party["total"] for party in parties.values()) == [
        Decimal("3.33"),
        Decimal("3.33"),
        Decimal("3.34"),
    ]
    # Nothing allocated: the idle cost stays unshared, as OpenCost's __idle__.
    assert fleet.opencost_shares(Decimal(10), {}) == ({}, Decimal("10.00"))


def test_opencosts_rule_reads_the_same_ledger(november, settings):
    """November by OpenCost's rule: idle (208 - 25.67 allocated = 182.33) shared by
    the allocated cost, so nlp, which reserved A100s it never used, pays less
    than by ours, and vision, which used most, more."""
    view = fleet.opencost(*NOVEMBER)[settings.PORTAL_CLUSTER_NAME]
    parties = view["parties"]
    assert sum(party["total"] for party in parties.values()) == Decimal("208.00")
    assert parties["vision"]["allocated"] == Decimal("13.11")
    assert parties["nlp"]["allocated"] == Decimal("8.00")
    assert parties["outside_teams"]["allocated"] == Decimal("4.56")
    # 182.3333 x 13.1111 / 25.6666 = 93.1400...; x 8 / 25.6666 = 56.8312...
    assert parties["vision"]["idle"] == Decimal("93.14")
    assert parties["nlp"]["idle"] == Decimal("56.83")


def test_the_fleet_is_the_gpus_the_cluster_has(
    cluster,
    demo_flavors,  # noqa: F811
    vision,
    admin_user,
):
    """Without node series in Prometheus, an hour's capacity is what the inventory
    counted on the cluster (either backend): the fleet's cost is those GPUs x
    their rate, split as everywhere else."""
    cluster_actions.record_inventory()
    h100 = demo_flavors["h100"]
    h100.refresh_from_db()
    assert h100.capacity > 0
    meter(datetime(2026, 11, 10, 9, tzinfo=UTC), teams={(vision, h100): (HOUR, HOUR, 0, 0)})
    body = client_for(admin_user).get("/api/v1/fleet-cost/", {"month": "2026-11"}).json()
    flavors = {flavor["flavor"]: flavor for flavor in body["clusters"][0]["flavors"]}
    assert Decimal(flavors["h100"]["fleet_cost"]) == h100.capacity * h100.price_per_gpu_hour
    assert flavors["h100"]["used"] == "2.00" and adds_up(flavors["h100"])
    devices = sum(Flavor.objects.values_list("capacity", flat=True))
    assert Decimal(body["gpu_hours"]["fleet_cost"]) == devices
    assert adds_up(body)
