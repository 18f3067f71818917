"""The Spend page in a month's first days, and for people in several teams."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from billing import reports
from tests.billing.ledger import meter
from tests.factories import add_member

EARLY = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)  # 33 hours into December


@pytest.fixture
def november_and_a_day(vision, h100):
    """November metered (a day), and December's first hours."""
    meter(datetime(2026, 11, 20, 10, tzinfo=UTC), teams={(vision, h100): (7200, 3600, 3600, 0)})
    for hour in range(1, 9):
        meter(datetime(2026, 12, 1, hour, tzinfo=UTC), teams={(vision, h100): (36000, 0, 36000, 0)})


def test_in_the_first_days_the_page_opens_at_the_last_full_month(client, alice, november_and_a_day):
    client.force_login(alice)
    with time_machine.travel(EARLY, tick=False):
        page = client.get("/billing/teams/vision/").content.decode()
    assert "<strong>2026-11</strong>" in page
    assert 'id="spend">8.00 USD' in page  # November's 2 GPU-hours at 4.00
    note = page.split('id="passed-over">')[1].split("</p>")[0]
    assert "2026-12 is under three days old" in note
    assert '<a href="?month=2026-12">2026-12 so far →</a>' in note


def test_the_month_so_far_has_no_forecast_from_a_few_hours(client, alice, november_and_a_day):
    client.force_login(alice)
    with time_machine.travel(EARLY, tick=False):
        page = client.get("/billing/teams/vision/", {"month": "2026-12"}).content.decode()
    assert 'id="passed-over"' not in page
    assert 'id="spend">320.00 USD' in page  # 80 GPU-hours at 4.00
    forecast = page.split('id="forecast">')[1].split("</dd>")[0]
    assert "USD" not in forecast and "from the fourth day of the month" in forecast


def test_from_the_fourth_day_the_current_month_opens_with_its_forecast():
    month = reports.Month.parse("2026-12")
    assert reports.Month.opened(None, now=month.start + timedelta(hours=72)) == (month, None)
    spent = reports.forecast(100, month, month.start + timedelta(hours=72))
    assert spent == Decimal("1033.33")  # 100 in 72 of December's 744 hours
    assert reports.forecast(100, month, month.start + timedelta(hours=71)) is None


def test_a_member_of_two_teams_switches_between_their_spend_pages(client, alice, nlp):
    add_member(nlp, alice)
    client.force_login(alice)
    page = client.get("/billing/teams/vision/", {"month": "2026-11"}).content.decode()
    switch = page.split('<nav class="team-switch small"')[1].split("</nav>")[0]
    assert '<a href="/billing/teams/nlp/?month=2026-11">NLP</a>' in switch
    assert '<a href="/billing/teams/vision/?month=2026-11" aria-current="page">Vision</a>' in switch
    assert client.get("/billing/teams/nlp/").status_code == 200


def test_a_member_of_one_team_gets_no_switch(client, alice):
    client.force_login(alice)
    assert b"team-switch" not in client.get("/billing/teams/vision/").content


def test_the_dashboard_links_to_each_teams_spend(client, alice):
    client.force_login(alice)
    page = client.get("/").content.decode()
    assert '<a href="/billing/teams/vision/">Vision\'s spend and idle GPUs →</a>' in page
