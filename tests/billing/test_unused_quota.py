"""Quota nobody uses, from the ledger's reserved-but-unallocated figure: on the team's
dashboard panel and Spend page (with "give it back" for whoever may), and on the
admins' overview. Vision holds 2 L4s it never used (48 GPU-hours, 48.00 USD); nlp
uses all of its quota (tests/billing/unused_month.py)."""

import pytest
import time_machine

from billing import reports
from gpu_requests.models import QuotaRequest
from tests.billing.unused_month import NOW, unused_month
from tests.factories import UserFactory, add_member


@pytest.fixture
def l4(catalog):
    return catalog["l4"]


@pytest.fixture
def month(grant, vision, nlp, alice, bob, l4, catalog):
    held, _ = unused_month(grant, vision, nlp, alice, bob, l4, catalog["h100"])
    with time_machine.travel(NOW, tick=False):
        yield held


def note(page, slug="vision"):
    start = page.index(f'id="unused-{slug}"')
    return page[start : page.index("</section>", start)]


def test_the_figure_is_the_ledgers(month, vision):
    (row,) = reports.unused_quota(reports.Month.parse("2026-11"))[vision.pk]["rows"]
    assert (row["reserved_gpu_hours"], row["reserved_unallocated_gpu_hours"]) == (48, 48)
    assert row["reserved_unallocated_cost"] == 48
    assert row["requests"] == [month]


def test_the_dashboard_says_it_and_offers_to_give_it_back(month, client, carol, alice):
    for who in (carol, alice):  # the manager, and the member who asked for it
        client.force_login(who)
        page = client.get("/").content.decode()
        said = note(page)
        assert "Quota nobody uses" in said
        assert "In November 2026, Vision held quota that no pod used" in said
        assert "48.00 USD" in said and "48 of 48</span> reserved GPU-hours unallocated" in said
        assert f'action="/requests/{month.pk}/end-early/"' in said
        assert "Give it back now" in said


def test_a_member_who_did_not_ask_sees_it_without_the_button(month, client, vision):
    dave = add_member(vision, UserFactory(username="dave"))
    client.force_login(dave)
    said = note(client.get("/").content.decode())
    assert "48.00 USD" in said
    assert "Give it back now" not in said
    assert "Its requester or a team manager can give it back." in said


def test_admins_see_it_on_the_team_holding_it_only(month, client, admin_user):
    client.force_login(admin_user)
    page = client.get("/").content.decode()
    nlp = page[page.index('id="team-nlp"') : page.index('id="team-vision"')]
    assert "Quota nobody uses" not in nlp  # it uses all it holds
    assert "48.00 USD" in note(page) and "Give it back now" in note(page)


def test_the_spend_page_says_it_and_gives_it_back(month, client, carol):
    client.force_login(carol)
    page = client.get("/billing/teams/vision/?month=2026-11").content.decode()
    said = note(page)
    assert 'id="unused-quota"' in page
    assert "48.00 USD" in said and "Give it back now" in said

    answer = client.post(
        f"/requests/{month.pk}/end-early/",
        {"next": "/billing/teams/vision/?month=2026-11"},
        follow=True,
    )
    assert answer.redirect_chain == [("/billing/teams/vision/?month=2026-11", 302)]
    page = answer.content.decode()
    assert f"Request #{month.pk} ended early." in page
    assert "Quota nobody uses" not in page  # nothing held any more
    assert QuotaRequest.objects.get(pk=month.pk).status == QuotaRequest.Status.EXPIRED


def test_admins_see_such_teams_on_the_overview(month, client, admin_user):
    client.force_login(admin_user)
    page = client.get("/billing/admin/?month=2026-11").content.decode()
    start = page.index('id="unused-quota"')
    section = page[start : page.index("</section>", start)]
    assert "Vision</a>" in section and "NLP" not in section
    assert "48 of 48" in section and "48.00 USD" in section
    assert f"#{month.pk}</a> (2 GPUs until" in section


def test_every_teams_figure_takes_two_queries(month, vision, django_assert_num_queries):
    with django_assert_num_queries(2):
        notes = reports.unused_quota(reports.Month.parse("2026-11"))
    assert list(notes) == [vision.pk]
