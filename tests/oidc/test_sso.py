"""Single sign-on against a real OpenID Connect provider (the certified
`oidc-provider` npm package, run with Node.js by the test), through Chromium:
login, the groups claim mapped to teams and the admin role (again at the next
login), logout at the provider too, and local accounts turned off."""

import copy
import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client

from teams.access import can_review
from teams.models import Membership
from tests.waiting import stop
from tests.web.test_browser_journey import browser  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser

PROVIDER_DIR = Path(__file__).with_name("provider")
OIDC_BACKEND = "accounts.oidc.PortalOIDCBackend"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_modules():
    """Install the provider from its lockfile, once (the npm registry is reachable);
    test processes running side by side (pytest -n) take turns."""
    npm = shutil.which("npm")
    if npm is None:
        message = "npm is missing (apt-get install nodejs npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with open(PROVIDER_DIR / "package-lock.json") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (PROVIDER_DIR / "node_modules" / "oidc-provider").exists():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True, timeout=300
            )


class Provider:
    def __init__(self, url, users_file):
        self.url = url
        self.users_file = users_file

    def set_users(self, users):
        self.users_file.write_text(json.dumps(users))


@pytest.fixture
def provider(live_server, tmp_path, settings):
    node_modules()
    port = free_port()
    users_file = tmp_path / "users.json"
    users_file.write_text("{}")
    process = subprocess.Popen(
        [
            "node",
            "server.js",
            str(port),
            f"{live_server.url}/account/sso/callback/",
            f"{live_server.url}/accounts/login/",
            str(users_file),
        ],
        cwd=PROVIDER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/.well-known/openid-configuration", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("oidc-provider did not start:\n" + process.stdout.read())
            time.sleep(0.2)
    settings.OIDC_RP_CLIENT_ID = "gpu-portal"
    settings.OIDC_RP_CLIENT_SECRET = "gpu-portal-test-secret"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{url}/auth"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{url}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{url}/me"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{url}/jwks"
    settings.OIDC_OP_LOGOUT_ENDPOINT = f"{url}/session/end"
    settings.PORTAL_OIDC_NAME = "Company SSO"
    settings.PORTAL_OIDC_ADMIN_GROUPS = ["gpu-platform-admins"]
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, OIDC_BACKEND]
    # As portal/settings.py does for OIDC_OP_LOGOUT_ENDPOINT: logout redirects there.
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"].append(url)
    settings.CONTENT_SECURITY_POLICY = policy
    yield Provider(url, users_file)
    stop(process)


@pytest.fixture
def page(browser, live_server):  # noqa: F811
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    # The provider's pages and ours only (its page would fetch a web font).
    page.route(
        lambda url: not url.startswith(("http://127.0.0.1", "http://localhost")),
        lambda route: route.abort(),
    )
    yield page
    context.close()
    connections.close_all()


def sign_in(page, username):
    page.goto("/accounts/login/")
    page.click("text=Sign in with Company SSO")
    page.fill("input[name=login]", username)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.click("button:has-text('Continue')")  # the provider's consent
    page.wait_for_selector("h1:has-text('Team dashboard')")


def roles(username):
    return dict(
        Membership.objects.filter(user__username=username).values_list("team__slug", "role")
    )


def test_sso_login_maps_groups_each_time_and_logout_ends_both_sessions(
    transactional_db, provider, page, vision, nlp
):
    provider.set_users(
        {
            "dana": {
                "name": "Dana Scully",
                "email": "dana@example.com",
                "groups": ["gpu-team-vision", "gpu-team-nlp-manager", "unrelated"],
            }
        }
    )
    sign_in(page, "dana")
    dana = get_user_model().objects.get(username="dana")
    assert (dana.email, dana.get_full_name()) == ("dana@example.com", "Dana Scully")
    assert roles("dana") == {"vision": "member", "nlp": "manager"}
    assert not can_review(dana)
    assert page.locator("#team-vision").count() == 1
    assert "Review queue" not in page.locator("nav").inner_text()

    page.click("button:has-text('Log out')")
    page.click("button:has-text('Yes, sign me out')")  # the provider's end-session page
    page.wait_for_selector("h1:has-text('Log in')")
    page.goto("/")
    assert "/accounts/login/" in page.url  # logged out here

    # The provider now says otherwise; the next login follows it.
    provider.set_users(
        {"dana": {"name": "Dana Scully", "email": "dana@example.com", "groups": [
            "gpu-team-nlp", "gpu-platform-admins",
        ]}}
    )  # fmt: skip
    sign_in(page, "dana")  # the provider asks again: its session ended too
    assert roles("dana") == {"nlp": "member"}
    dana = get_user_model().objects.get(username="dana")
    assert can_review(dana) and dana.is_staff
    assert "Review queue" in page.locator("nav").inner_text()


def test_local_accounts_can_be_turned_off(db, provider, settings, alice):
    settings.PORTAL_LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", OIDC_BACKEND]
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Company SSO" in page
    assert 'name="password"' not in page
    response = Client().post("/accounts/login/", {"username": "alice", "password": "demo"})
    assert "_auth_user_id" not in response.wsgi_request.session


def test_sso_is_a_404_until_configured(db):
    assert Client().get("/account/sso/login/").status_code == 404
    assert "Sign in with" not in Client().get("/accounts/login/").content.decode()
