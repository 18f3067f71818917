"""The portal's name and icon on its pages, the API docs and the Django admin."""

import pytest
from django.contrib.auth.models import Permission

from gpu_requests import actions
from tests.factories import submit


def test_pages_have_the_favicon(login, alice):
    page = login(alice).get("/").content.decode()
    assert 'rel="icon" href="/static/favicon.svg"' in page


def test_the_api_docs_carry_the_portals_header_and_icon(login, alice):
    page = login(alice).get("/api/docs/").content.decode()
    assert '<a class="brand" href="/">GPU portal</a>' in page
    assert 'href="/static/favicon.svg"' in page
    # The site's own header: the same menu as every page, this one marked, and log out.
    header = page.split('<header class="topbar">')[1].split("</header>")[0]
    for name in ("Dashboard", "Requests", "Timeline", "New request", "Spend", "Batch"):
        assert f">{name}</a>" in header
    assert '<a href="/api/docs/" aria-current="page">API docs</a>' in header
    assert "Log out" in header and "Review queue" not in header


def test_the_api_docs_header_shows_admins_their_pages(login, admin_user):
    page = login(admin_user).get("/api/docs/").content.decode()
    assert ">Review queue</a>" in page and ">Cluster</a>" in page


@pytest.fixture
def staff(client, admin_user):
    admin_user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_quotarequest", "change_quotarequest"])
    )
    client.force_login(admin_user)
    return client


def test_the_admin_is_branded_and_shows_money_in_one_format(staff, admin_user, vision, alice, h100):
    submit(vision, h100, alice, gpus=2, hours=24)
    page = staff.get("/admin/gpu_requests/quotarequest/").content.decode()
    assert "GPU portal administration" in page and "favicon.svg" in page
    assert "192.00 USD" in page


def test_read_only_requests_have_no_save_button_and_link_to_the_portal(
    staff, admin_user, vision, alice, h100
):
    quota_request = actions.approve(submit(vision, h100, alice), by=admin_user)
    page = staff.get(
        f"/admin/gpu_requests/quotarequest/{quota_request.pk}/change/"
    ).content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page
    assert "View on site" in page
