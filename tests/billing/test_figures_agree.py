"""Every figure agrees with every other: per team and month, the overview (the
admin page and its CSV), the team page (its figures and what it prints), the
sum of the team's report cards, each of the team page's CSVs and each API
grouping give the same spend, idle cost, idle GPU-hours and credit to the
cent. November is a past month with a spot reclaim and an XID failure,
metered from a real Prometheus; December the current month
(tests/billing/lost_month.py)."""

import csv
import io
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest

from tests.api.conftest import client_for
from tests.billing.ledger import meter, workload
from tests.billing.lost_month import DEC9, lost_month, prometheus_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.prometheus

CENT = Decimal("0.01")
FIGURES = ("cost", "idle_cost", "idle_gpu_hours", "credit")


def cents(values):
    """{figure: the sum of `values` rows' figure, to the cent}."""
    return {
        key: sum((Decimal(str(row[key])) for row in values), Decimal(0)).quantize(
            CENT, ROUND_HALF_UP
        )
        for key in FIGURES
    }


def csv_rows(response):
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def printed(page, element_id):
    """The amount the page prints in the element of `element_id` ("12.34 USD")."""
    match = re.search(rf'id="{element_id}">(?:<strong[^>]*>)?(-?[\d,]+\.\d\d) USD', page)
    assert match, element_id
    return Decimal(match.group(1).replace(",", ""))


def every_answer(client, api, slug, month):
    """{where: figures} for one team and month, from every page, card, CSV and API."""
    query = {"month": month}
    answers = {}
    admin = client.get("/billing/admin/", query)
    answers["overview"] = cents([row for row in admin.context["teams"] if row["slug"] == slug])
    answers["overview CSV"] = cents(
        [
            r
            for r in csv_rows(client.get("/billing/admin/", {**query, "export": "teams"}))
            if r["slug"] == slug
        ]
    )
    response = client.get(f"/billing/teams/{slug}/", query)
    report = response.context["report"]
    answers["team page"] = cents([report["totals"]])
    page = response.content.decode()
    answers["team page, printed"] = {
        "cost": printed(page, "spend"),
        "idle_cost": printed(page, "idle-cost"),
        "idle_gpu_hours": answers["team page"]["idle_gpu_hours"],  # printed in the table
        "credit": printed(page, "credit"),
    }
    cards = []
    for load in {(w["namespace"], w["kind"], w["name"]) for w in report["workloads"]}:
        card = client.get(f"/billing/teams/{slug}/workloads/{'/'.join(load)}/").context["card"]
        cards.append(card)
    answers["report cards"] = cents(cards)
    for table in ("flavors", "days", "workloads"):
        rows = csv_rows(client.get(f"/billing/teams/{slug}/", {**query, "export": table}))
        answers[f"{table} CSV"] = cents(rows)
    for group_by in ("team", "flavor", "day", "workload"):
        body = api.get("/api/v1/billing/usage/", {**query, "team": slug, "group_by": group_by})
        assert body.status_code == 200, body.content
        answers[f"API by {group_by}"] = cents(body.json()["results"])
    return answers


@pytest.fixture
def two_teams(lost_month, nlp, bob):  # noqa: F811
    """nlp in December too, so that a team's figures are told from the others'."""
    h100 = lost_month["h100"]
    meter(
        DEC9.replace(hour=11),
        teams={(nlp, h100): (3 * 3600, 3600, 2 * 3600, 0)},
        workloads={(nlp, "nlp", "Job", "eval", h100): workload(3 * 3600, 3600, 2 * 3600)},
    )
    return lost_month


@pytest.mark.parametrize(
    ("slug", "month", "expected"),
    [
        # The reclaim (3 L4-hours at 0.50, 2 of them idle) and the XID (1 H100-hour at 4.00)
        # are credited; the notebook's idle hour at 4.00 is the idle cost.
        (
            "vision",
            "2026-11",
            {"cost": "4.00", "idle_cost": "4.00", "idle_gpu_hours": "1.00", "credit": "5.50"},
        ),
        (
            "vision",
            "2026-12",
            {"cost": "8.00", "idle_cost": "4.00", "idle_gpu_hours": "1.00", "credit": "0.00"},
        ),
        (
            "nlp",
            "2026-12",
            {"cost": "12.00", "idle_cost": "8.00", "idle_gpu_hours": "2.00", "credit": "0.00"},
        ),
    ],
)
def test_every_page_card_csv_and_api_answer_gives_the_same_figures(
    two_teams, client, admin_user, slug, month, expected
):
    client.force_login(admin_user)
    answers = every_answer(client, client_for(admin_user), slug, month)
    expected = {key: Decimal(value) for key, value in expected.items()}
    disagree = {where: got for where, got in answers.items() if got != expected}
    assert not disagree, disagree


def test_a_member_sees_the_same_figures_as_an_admin(two_teams, client, alice, admin_user):
    client.force_login(alice)
    mine = client.get("/billing/teams/vision/", {"month": "2026-11"}).context["report"]["totals"]
    api = client_for(alice).get("/api/v1/billing/usage/", {"month": "2026-11"}).json()
    assert [row["team"] for row in api["results"]] == ["vision"]
    assert cents(api["results"]) == cents([mine])
