"""The admin page ranks teams by idle cost, with each team's trend, and draws
every team's workloads as one picture."""

from datetime import UTC, datetime

import pytest
import time_machine

from tests.billing.idle_month import vision_month

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
URL = "/billing/admin/?month=2026-11"


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def month(vision, nlp, h100, a100):
    vision_month(vision, nlp, h100, a100)


def test_teams_are_ranked_by_idle_cost_with_a_trend(client, admin_user, month):
    client.force_login(admin_user)
    page = client.get("/billing/admin/").content.decode()
    page = client.get(URL).content.decode()
    teams = page[page.index('id="teams"') : page.index('id="cluster-cost"')]
    assert 'aria-sort="descending"' in teams and "Idle cost ▼" in teams
    assert teams.index(">Vision<") < teams.index(">NLP<")
    # A point per day of the month, each with its exact idle cost.
    assert teams.count("<circle") == 2 * 30
    assert "<title>03 Nov: 251.00 USD</title>" in teams  # the notebook's 35.00 + 18 sweeps
    assert "<title>20 Nov: 0.00 USD</title>" in teams


def test_every_teams_workloads_in_one_picture(client, admin_user, month):
    client.force_login(admin_user)
    page = client.get(URL).content.decode()
    picture = page[page.index('id="cluster-picture"') : page.index('id="teams"')]
    assert (
        picture.index("Pod notebook") < picture.index("18 jobs sweep-0") < picture.index("Job eval")
    )
    assert '<span class="muted">NLP</span>' in picture
    assert "/billing/teams/nlp/workloads/nlp/Job/eval/" in picture


def test_query_count_is_pinned(client, admin_user, month, django_assert_num_queries):
    client.force_login(admin_user)
    with django_assert_num_queries(13):
        client.get(URL)
