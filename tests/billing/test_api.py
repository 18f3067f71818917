from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.models import Rate
from tests.billing.ledger import meter, workload

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


@pytest.fixture
def usage(vision, nlp, h100, a100):
    meter(
        HOUR,
        teams={
            (vision, h100): (8 * 3600, 2 * 3600, 6 * 3600, 0),
            (vision, a100): (3600, 0, 1800, 1800),
            (nlp, h100): (2 * 3600, 2 * 3600, 0, 0),
        },
        workloads={
            (vision, "vision", "Job", "train", h100): workload(8 * 3600, 2 * 3600, 6 * 3600)
        },
    )


def test_members_see_their_own_teams_only(client, alice, usage):
    client.force_login(alice)
    body = client.get("/api/v1/billing/usage/?group_by=team").json()
    assert [row["team"] for row in body["results"]] == ["vision"]
    row = body["results"][0]
    assert row["allocated_gpu_hours"] == "9.0000"
    assert row["unmetered_gpu_hours"] == "0.5000"
    assert row["cost"] == "34.50" and row["currency"] == "USD"
    assert client.get("/api/v1/billing/usage/?team=nlp").status_code == 404


def test_group_by_flavor_day_and_workload(client, admin_user, usage):
    client.force_login(admin_user)
    flavors = client.get("/api/v1/billing/usage/?group_by=flavor").json()["results"]
    assert {row["flavor"]: row["allocated_gpu_hours"] for row in flavors} == {
        "h100": "10.0000",
        "a100": "1.0000",
    }
    days = client.get("/api/v1/billing/usage/?group_by=day&flavor=h100").json()["results"]
    assert [(d["day"], d["allocated_gpu_hours"], d["idle_cost"], d["cost"]) for d in days] == [
        ("2026-11-10", "10.0000", "24.00", "40.00")
    ]
    loads = client.get("/api/v1/billing/usage/?group_by=workload").json()["results"]
    assert loads[0]["name"] == "train" and loads[0]["idle_cost"] == "24.00"


@pytest.mark.parametrize(
    "query, field",
    [
        ("group_by=week", "group_by"),
        ("from=yesterday", "from"),
        ("from=2026-11-10T00:00Z&to=2026-11-01T00:00Z", "to"),
        ("to=", "to"),
        ("team=" + "x" * 64, "team"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(client, alice, query, field):
    client.force_login(alice)
    response = client.get(f"/api/v1/billing/usage/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_rates_are_appended_by_admins_only(client, alice, admin_user, h100):
    body = {"flavor": "h100", "effective_from": "2026-12-01T00:00:00Z", "price_per_gpu_hour": "5"}
    client.force_login(alice)
    assert (
        client.post("/api/v1/billing/rates/", body, content_type="application/json").status_code
        == 403
    )
    client.force_login(admin_user)
    response = client.post("/api/v1/billing/rates/", body, content_type="application/json")
    assert response.status_code == 201
    assert Rate.objects.get().price_per_gpu_hour == Decimal("5")
    again = client.post("/api/v1/billing/rates/", body, content_type="application/json")
    assert again.status_code == 400 and "effective_from" in again.json()
    off_hour = {**body, "effective_from": "2026-12-01T00:30:00Z"}
    response = client.post("/api/v1/billing/rates/", off_hour, content_type="application/json")
    assert response.status_code == 400 and "effective_from" in response.json()
    assert client.get("/api/v1/billing/rates/").json()[0]["price_per_gpu_hour"] == "5.0000"


def test_budgets(client, carol, alice, bob, vision):
    client.force_login(carol)
    body = {"team": "vision", "monthly_amount": "250.00"}
    response = client.post("/api/v1/billing/budgets/", body, content_type="application/json")
    assert response.status_code == 200
    assert client.get("/api/v1/billing/budgets/").json() == [
        {
            "team": "vision",
            "monthly_amount": "250.00",
            "mode": "soft",
            "when_spent": "stop_running",
            "spent_at": None,
            "currency": "USD",
        }
    ]
    hard = {**body, "mode": "hard"}
    response = client.post("/api/v1/billing/budgets/", hard, content_type="application/json")
    assert response.json()["mode"] == "hard"
    assert client.get("/api/v1/billing/budgets/").json()[0]["mode"] == "hard"
    held = {**hard, "when_spent": "hold_new"}
    response = client.post("/api/v1/billing/budgets/", held, content_type="application/json")
    assert response.json()["when_spent"] == "hold_new"
    # Left out, the rule stays as it is.
    response = client.post("/api/v1/billing/budgets/", hard, content_type="application/json")
    assert response.json()["when_spent"] == "hold_new"
    bad = {**body, "mode": "strict"}
    response = client.post("/api/v1/billing/budgets/", bad, content_type="application/json")
    assert response.status_code == 400 and "mode" in response.json()
    client.force_login(alice)
    response = client.post("/api/v1/billing/budgets/", body, content_type="application/json")
    assert response.status_code == 403
    client.force_login(bob)
    assert client.get("/api/v1/billing/budgets/").json() == []
    response = client.post("/api/v1/billing/budgets/", body, content_type="application/json")
    assert response.status_code == 404
    huge = {"team": "nlp", "monthly_amount": "1e999"}
    response = client.post("/api/v1/billing/budgets/", huge, content_type="application/json")
    assert response.status_code == 400 and "monthly_amount" in response.json()


def test_reservation_mode_charges_the_greater_of_reserved_and_allocated(
    client, alice, vision, h100, settings, grant
):
    # 2 GPU-hours allocated of 6 reserved, at 4.00.
    grant(vision, h100, 6, HOUR, HOUR + timedelta(hours=1), alice)
    meter(HOUR, teams={(vision, h100): (2 * 3600, 3600, 3600, 0)})
    client.force_login(alice)
    row = client.get("/api/v1/billing/usage/").json()["results"][0]
    assert (row["cost"], row["other_cost"]) == ("8.00", "24.00")
    settings.PORTAL_BILLING_CHARGE = "reservation"
    body = client.get("/api/v1/billing/usage/").json()
    assert body["charge"] == "reservation"
    assert (body["results"][0]["cost"], body["results"][0]["other_cost"]) == ("24.00", "8.00")


@pytest.mark.parametrize(
    "url, query, names",
    [
        ("/api/v1/billing/usage/", "period=2026-11", ["period"]),
        ("/api/v1/billing/usage/", "month=2026-11&grup_by=day&Team=vision", ["Team", "grup_by"]),
        ("/api/v1/billing/rates/", "flavor=h100", ["flavor"]),
        ("/api/v1/billing/budgets/", "team=vision", ["team"]),
    ],
)
def test_a_query_parameter_an_endpoint_does_not_know_is_a_400_naming_it(
    client, alice, url, query, names
):
    client.force_login(alice)
    response = client.get(f"{url}?{query}")
    assert response.status_code == 400
    body = response.json()
    assert sorted(body) == names
    assert "Unknown query parameter" in body[names[0]][0]


def test_month_is_the_pages_period(client, alice, vision, h100):
    meter(HOUR, teams={(vision, h100): (3600, 3600, 0, 0)})
    meter(HOUR.replace(month=10), teams={(vision, h100): (2 * 3600, 0, 2 * 3600, 0)})
    client.force_login(alice)

    def cost(**query):
        return client.get("/api/v1/billing/usage/", query).json()["results"][0]["cost"]

    assert (cost(month="2026-11"), cost(month="2026-10"), cost()) == ("4.00", "8.00", "12.00")
    assert client.get("/api/v1/billing/usage/", {"month": "2026-09"}).json()["results"] == []
    for bad in ("2026-13", "11-2026", "soon"):
        response = client.get("/api/v1/billing/usage/", {"month": bad})
        assert response.status_code == 400 and "month" in response.json()
    both = client.get("/api/v1/billing/usage/", {"month": "2026-11", "from": "2026-11-02T00:00Z"})
    assert both.status_code == 400 and "month" in both.json()
