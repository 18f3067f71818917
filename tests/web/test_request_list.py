"""The request list: filters in the address, sortable, paged, members see their teams'."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from gpu_requests import actions
from tests.factories import next_week, submit

URL = reverse("request_list")


@pytest.fixture
def requests(vision, nlp, alice, carol, bob, admin_user, h100, a100):
    a100.refresh_from_db()
    first = submit(vision, h100, alice, gpus=1, reason="detector fine-tune")
    second = submit(vision, a100, carol, gpus=2, starts_at=next_week(days=20), reason="eval")
    third = submit(nlp, h100, bob, gpus=3, reason="pretrain")
    actions.reject(second, by=admin_user, reason="the budget is spent")
    return {"first": first, "second": second, "third": third}


def shown(response):
    assert response.status_code == 200
    page = response.content.decode()
    return [int(part.split('"')[0]) for part in page.split('<tr id="row-')[1:]]


def test_it_redirects_anonymous_to_login(client, db):
    assert client.get(URL).status_code == 302


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("admin_user", ["third", "second", "first"]),
        ("alice", ["second", "first"]),
        ("bob", ["third"]),
        ("charlie", []),
    ],
)
def test_it_shows_the_users_teams_requests_newest_first(
    login, request, persona, expected, requests
):
    user = request.getfixturevalue(persona)
    assert shown(login(user).get(URL)) == [requests[name].pk for name in expected]


def test_it_filters_by_everything_in_the_address(login, admin_user, requests, bob):
    client = login(admin_user)
    ids = {name: req.pk for name, req in requests.items()}
    assert shown(client.get(URL, {"team": "vision"})) == [ids["second"], ids["first"]]
    assert shown(client.get(URL, {"flavor": "a100"})) == [ids["second"]]
    assert shown(client.get(URL, {"status": "rejected"})) == [ids["second"]]
    assert shown(client.get(URL, {"requester": "bob"})) == [ids["third"]]
    assert shown(client.get(URL, {"q": "DETECTOR"})) == [ids["first"]]
    assert shown(client.get(URL, {"q": "budget"})) == [ids["second"]]  # a decision's reason
    later = (next_week(days=19)).date().isoformat()
    assert shown(client.get(URL, {"period_from": later})) == [ids["second"]]
    soon = (next_week(days=8)).date().isoformat()
    assert shown(client.get(URL, {"period_to": soon})) == [ids["third"], ids["first"]]
    both = client.get(URL, {"team": "vision", "status": "pending", "q": "fine"})
    assert shown(both) == [ids["first"]]


def test_it_sorts_by_a_column_and_keeps_the_filters_in_its_links(login, admin_user, requests):
    client = login(admin_user)
    ids = [requests[name].pk for name in ("first", "second", "third")]
    assert shown(client.get(URL, {"sort": "gpus"})) == ids
    assert shown(client.get(URL, {"sort": "-gpus"})) == ids[::-1]
    assert shown(client.get(URL, {"sort": "created"})) == ids
    page = client.get(URL, {"team": "vision", "sort": "gpus"}).content.decode()
    assert 'aria-sort="ascending"' in page
    assert 'href="?team=vision&amp;sort=-gpus"' in page  # the same column again reverses


def test_a_members_team_filter_stays_within_their_teams(login, alice, requests):
    assert shown(login(alice).get(URL, {"team": "nlp"})) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "bogus"}, "status"),
        ({"period_from": "2026-13-45"}, "period_from"),
        ({"sort": "justification"}, "sort"),
        ({"q": "x" * 201}, "q"),
    ],
)
def test_bad_filters_are_form_errors_not_500s(login, alice, requests, params, field):
    response = login(alice).get(URL, params)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="field-error"' in page and "Fix the filters above." in page


def test_it_pages_and_keeps_the_filters(login, alice, vision, h100):
    for _ in range(27):
        submit(vision, h100, alice, gpus=1)
    client = login(alice)
    first = client.get(URL, {"status": "pending"}).content.decode()
    assert first.count('<tr id="row-') == 25 and "Page 1 of 2" in first
    assert 'href="?status=pending&amp;page=2"' in first
    assert (
        client.get(URL, {"status": "pending", "page": 2}).content.decode().count('<tr id="row-')
        == 2
    )


def test_it_lists_in_a_fixed_number_of_queries(login, admin_user, requests, vision, alice, h100):
    client = login(admin_user)
    counts = []
    for extra in (0, 6):
        for _ in range(extra):
            submit(vision, h100, alice, gpus=1, starts_at=next_week(days=3) + timedelta(hours=1))
        with CaptureQueriesContext(connection) as queries:
            client.get(URL, {"q": "a", "sort": "-cost"})
        counts.append(len(queries))
    # session, user, 2 x permissions, team choices, flavor choices, count, page
    assert counts == [8, 8]


def test_a_period_ending_before_it_starts_matches_nothing(login, alice, requests):
    response = login(alice).get(URL, {"period_from": "2026-05-02", "period_to": "2026-05-01"})
    assert shown(response) == []


def test_a_nul_byte_in_the_address_is_a_readable_400(login, alice, requests):
    response = login(alice).get(URL, {"q": "a\x00b"})
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_long_word_wraps(login, alice, vision, h100):
    submit(vision, h100, alice, gpus=1, reason="x" * 2000)
    page = login(alice).get(URL).content.decode()
    assert '<div class="small wrap">' in page
