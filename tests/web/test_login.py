"""Log in, log out, and the layout every page shares."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.urls import reverse

LOGIN = reverse("login")
LOGOUT = reverse("logout")


def test_it_shows_the_login_form(client, db):
    response = client.get(LOGIN)
    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert b'name="password"' in response.content


def test_it_logs_in_and_lands_on_the_dashboard(client, alice):
    response = client.post(LOGIN, {"username": "alice", "password": "demo"})
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard")
    assert b"Team dashboard" in client.get(reverse("dashboard")).content


def test_it_returns_to_next_after_login(client, alice):
    response = client.post(
        LOGIN, {"username": "alice", "password": "demo", "next": reverse("request_new")}
    )
    assert response["Location"] == reverse("request_new")


def test_it_refuses_a_wrong_password(client, alice):
    response = client.post(LOGIN, {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"did not match" in response.content


def test_logout_is_post_only(client, alice):
    client.force_login(alice)
    assert client.get(LOGOUT).status_code == 405
    response = client.post(LOGOUT)
    assert response.status_code == 302
    assert response["Location"] == LOGIN
    assert client.get(reverse("dashboard")).status_code == 302


@pytest.mark.parametrize(("who", "sees_queue"), [("alice", False), ("admin_user", True)])
def test_the_nav_links_the_review_queue_for_reviewers_only(login, request, who, sees_queue):
    page = login(request.getfixturevalue(who)).get(reverse("dashboard")).content.decode()
    assert (f'href="{reverse("review_queue")}"' in page) == sees_queue
    assert 'href="/api/docs/"' in page
    assert f'action="{LOGOUT}"' in page


def test_the_layout_sends_csrf_to_htmx_and_loads_nothing_from_the_internet(login, alice):
    page = login(alice).get(reverse("dashboard")).content.decode()
    assert re.search(r"""<body hx-headers='\{"X-CSRFToken": "[^"]+"\}'>""", page)
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert not [s for s in sources if s.startswith(("http:", "https:", "//"))]
    scripts = re.findall(r'<script src="/static/([^"]+)"', page)
    assert scripts and all(finders.find(path) for path in scripts)
    assert finders.find("css/portal.css")


def test_unknown_pages_get_the_pretty_404(login, alice):
    response = login(alice).get("/no/such/page/")
    assert response.status_code == 404
    assert b"Back to the dashboard" in response.content


def test_the_500_page_renders_without_a_request(db):
    assert "Something went wrong" in render_to_string("500.html")
