"""The admin page ranks teams by idle cost, with each team's trend, and draws
every team's workloads as one picture."""

from tests.billing.idle_month import NOW, _clock, month  # noqa: F401 (fixtures)

URL = "/billing/admin/?month=2026-11"


def test_teams_are_ranked_by_idle_cost_with_a_trend(client, admin_user, month):  # noqa: F811
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


def test_every_teams_workloads_in_one_picture(client, admin_user, month):  # noqa: F811
    client.force_login(admin_user)
    page = client.get(URL).content.decode()
    picture = page[page.index('id="cluster-picture"') : page.index('id="teams"')]
    assert (
        picture.index("Pod notebook") < picture.index("18 jobs sweep-0") < picture.index("Job eval")
    )
    assert '<span class="muted">NLP</span>' in picture
    assert "/billing/teams/nlp/workloads/nlp/Job/eval/" in picture


def test_query_count_is_pinned(client, admin_user, month, django_assert_num_queries):  # noqa: F811
    client.force_login(admin_user)
    # As the admin page's (test_admin_page): with quota nobody uses and the newest
    # metered hour (today's partial day).
    with django_assert_num_queries(15):
        client.get(URL)
