"""The web pages' schemathesis: no HTML view answers 500 to what a client can send.

As each persona, the walk starts from the portal's pages, follows every
same-site link it finds and reads every form (fields, hidden fields, named
buttons, and the htmx URL a form also posts to). Then, page by page and form
by form, it sends hostile values: NUL, Unicode digits ("²"), `next` values
that are not paths, 10,000-character words, control characters, huge and
negative numbers. Any 5xx fails the test with the request that caused it.

Each POST runs inside a savepoint that is rolled back afterwards, so one form's
change (a removed member, an archived team) does not hide the next form's
page; `transaction.on_commit` side effects (the cluster, Celery) never run in
these tests. The Django admin is walked too, as a superuser.
"""

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import time, timedelta
from decimal import Decimal
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.core.signals import got_request_exception
from django.db import transaction
from django.test import Client
from django.urls import Resolver404, get_resolver, resolve

from accounts import actions as token_actions
from batch import actions as batch_actions
from batch.models import ImageRule
from billing import actions as billing_actions
from gpu_requests import actions
from idle import actions as idle_actions
from idle.models import IdleState
from notifications import actions as hook_actions
from teams import actions as team_actions
from tests.billing.ledger import meter, workload
from tests.factories import TeamFactory, UserFactory, next_week, submit

HOSTILE = [
    "\x00",
    "²",
    "x",
    "a:b",
    "//evil.example/",
    "javascript:alert(1)",
    "-1",
    "99999999999999999999999999",
    "1e309",
    "NaN",
    "w" * 10_000,
    "\r\n\t\x01\x1b\x7f",
    "<b>'\"&",
    "",
]
# One field or parameter at a time, these (each stands for a kind of the above).
ONE_AT_A_TIME = ["\x00", "²", "a:b", "-99999999999999999999", "w" * 10_000]
# Query parameters some view reads, tried on every page besides the page's own.
KNOWN_PARAMS = [
    "page",
    "team",
    "flavor",
    "status",
    "sort",
    "dir",
    "month",
    "export",
    "window",
    "follows",
    "kind",
    "timeline",
    "q",
    "requester",
    "period_from",
    "period_to",
    "next",
    "validate",
    "from",
    "to",
]
# Pages the walk starts from; the rest it finds by their links.
SEEDS = [
    "/",
    "/requests/",
    "/requests/new/",
    "/review/",
    "/timeline/",
    "/preferences/",
    "/teams/new/",
    "/teams/vision/",
    "/teams/nlp/",
    "/batch/",
    "/batch/jobs/",
    "/batch/jobs/new/",
    "/billing/",
    "/billing/admin/",
    "/billing/health/",
    "/billing/teams/vision/",
    "/cluster/",
    "/webhooks/",
    "/teams/vision/webhook/",
    "/account/tokens/",
    "/accounts/login/",
    "/accounts/password_change/",
]
# The superuser walks the admin of the portal's own models (not Django's, Celery
# beat's or axes'), one page per view: change lists' filter and sort links alike.
ADMIN_SEEDS = [
    f"/admin/{app}/"
    for app in ("gpu_requests", "accounts", "cluster", "billing", "provisioning", "batch")
] + ["/admin/notifications/"]
ADMIN = re.compile(
    r"^/admin/(gpu_requests|accounts|cluster|billing|provisioning|batch|notifications)/"
)
# Not walked: leaving the session, and what is not an HTML view.
SKIP = re.compile(
    r"^/(accounts/logout/|static/|api/|metrics|healthz|readyz|account/sso/|admin/logout)"
)
MAX_PAGES = 300
# Pages of one view walked (a pending and an approved request show other forms);
# the query fuzzing takes the first of each.
PER_VIEW = 8


@dataclass
class Form:
    action: str
    method: str
    fields: list = field(default_factory=list)  # [(name, value)]
    buttons: list = field(default_factory=list)  # [(name, value)] of named submit buttons
    htmx: list = field(default_factory=list)  # hx-post / hx-get URLs
    also: list = field(default_factory=list)  # other actions its buttons post to (formaction)


class PageParser(HTMLParser):
    """Links, and forms with their fields' current values, as a browser would send them."""

    def __init__(self):
        super().__init__()
        self.links, self.forms = [], []
        self.form = None
        self.select = None  # (name, [options], selected)
        self.textarea = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "hx-get"):
            if a.get(key) and tag != "link":
                self.links.append(a[key])
        if tag == "form":
            self.form = Form(a.get("action") or "", (a.get("method") or "get").lower())
            self.form.htmx = [a[k] for k in ("hx-post", "hx-get") if a.get(k)]
            self.forms.append(self.form)
            return
        if self.form is None:
            if a.get("hx-post"):
                self.forms.append(Form(a["hx-post"], "post"))
            return
        if tag in ("button", "input"):
            if a.get("formaction"):
                self.form.also.append(a["formaction"])
            if a.get("hx-post"):
                self.form.htmx.append(a["hx-post"])
        name = a.get("name")
        if tag == "input" and name:
            kind = (a.get("type") or "text").lower()
            if kind in ("submit", "button", "image"):
                self.form.buttons.append((name, a.get("value") or ""))
            elif kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.form.fields.append((name, a.get("value") or "on"))
            else:
                self.form.fields.append((name, a.get("value") or ""))
        elif tag == "button" and name:
            self.form.buttons.append((name, a.get("value") or ""))
        elif tag == "select" and name:
            self.select = (name, [], [])
        elif tag == "option" and self.select is not None:
            value = a.get("value", "")
            self.select[1].append(value)
            if "selected" in a:
                self.select[2].append(value)
        elif tag == "textarea" and name:
            self.textarea = [name, ""]

    def handle_data(self, data):
        if self.textarea is not None:
            self.textarea[1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.form = None
        elif tag == "select" and self.select is not None and self.form is not None:
            name, options, selected = self.select
            chosen = selected[:1] or [o for o in options if o][:1] or options[:1]
            self.form.fields.extend((name, value) for value in chosen)
            self.select = None
        elif tag == "textarea" and self.textarea is not None and self.form is not None:
            self.form.fields.append(tuple(self.textarea))
            self.textarea = None


class Walk:
    def __init__(self, client, who):
        self.client, self.who = client, who
        self.failures, self.exceptions = [], []
        self.requests = 0
        self.views = set()

    def send(self, method, url, data=None, htmx=False):
        self.exceptions.clear()
        key = pattern_of(url)
        if key is not None:
            self.views.add(key[0])
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        self.requests += 1
        if method == "get":
            response = self.client.get(url, data or {}, **headers)
        else:
            # A savepoint per POST: every form is tried on the same data.
            with transaction.atomic():
                response = self.client.post(url, data or {}, **headers)
                transaction.set_rollback(True)
        if response.status_code >= 500:
            cause = repr(self.exceptions[-1])[:300] if self.exceptions else ""
            shown = {k: (v[:40] + "..." if len(v) > 40 else v) for k, v in (data or {}).items()}
            self.failures.append(
                f"{self.who}: {method.upper()} {url[:200]} {shown} -> "
                f"{response.status_code} {cause}"
            )
        return response

    def record(self, sender, request=None, **kwargs):
        import sys

        self.exceptions.append(sys.exc_info()[1])


def same_site(url, base):
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith("#"):
        return None
    path = parts.path or urlsplit(base).path
    if not path.startswith("/"):
        path = urlsplit(base).path.rsplit("/", 1)[0] + "/" + path
    if SKIP.match(path):
        return None
    return path + (f"?{parts.query}" if parts.query else "")


def pattern_of(url):
    """The view and the query's parameter names: two links alike are walked once."""
    parts = urlsplit(url)
    try:
        match = resolve(parts.path)
    except Resolver404:
        return None
    if parts.path.startswith("/admin/"):
        return (match.route, ())
    names = tuple(sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)}))
    return (match.route, names)


def crawl(walk, seeds, admin=False):
    """{pattern: url} of the pages reached, and the forms found on them."""
    queue, pages, forms, seen_forms = list(seeds), {}, [], set()
    walked, seen = defaultdict(int), set()
    while queue and len(seen) < MAX_PAGES:
        url = queue.pop(0)
        key = pattern_of(url)
        if key is None or url in seen or walked[key] >= PER_VIEW:
            continue
        seen.add(url)
        walked[key] += 1
        pages.setdefault(key, url)
        response = walk.send("get", url)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        parser = PageParser()
        parser.feed(response.content.decode())
        for link in parser.links:
            target = same_site(link, url)
            if target and (ADMIN.match(target) if admin else not target.startswith("/admin/")):
                queue.append(target)
        for form in parser.forms:
            action = same_site(form.action or url, url)
            if action is None:
                continue
            form.action = action
            form.htmx = [u for u in (same_site(h, url) for h in form.htmx) if u]
            form.also = [u for u in (same_site(h, url) for h in form.also) if u]
            form_key = (pattern_of(action), form.method, tuple(sorted(n for n, _ in form.fields)))
            if form_key not in seen_forms:
                seen_forms.add(form_key)
                forms.append(form)
            if form.method == "get":
                query = urlencode([(n, v) for n, v in form.fields if n])
                queue.append(action.split("?")[0] + (f"?{query}" if query else ""))
    return pages, forms


def hostile_queries(walk, pages):
    for url in pages.values():
        path, _, query = url.partition("?")
        own = dict(parse_qsl(query, keep_blank_values=True))
        for value in HOSTILE:
            # Every parameter a view might read at once, then the page's own one by one.
            walk.send("get", path, {**own, **{name: value for name in KNOWN_PARAMS}})
        for value in ONE_AT_A_TIME:
            for name in own:
                walk.send("get", path, {**own, name: value})


def hostile_forms(walk, forms):
    for form in forms:
        base = dict(form.fields)
        names = [*base, "next"]
        targets = [(form.action, False), *((url, False) for url in form.also)]
        targets += [(url, True) for url in form.htmx]
        for url, htmx in targets:
            if form.method == "get":
                continue
            walk.send("post", url, base, htmx=htmx)
            for button, value in form.buttons:
                walk.send("post", url, {**base, button: value}, htmx=htmx)
            for value in HOSTILE:
                walk.send("post", url, {name: value for name in names}, htmx=htmx)
            for value in ONE_AT_A_TIME:
                for name in names:
                    walk.send("post", url, {**base, name: value}, htmx=htmx)


@pytest.fixture
def world(admin_user, alice, carol, bob, charlie, vision, nlp, h100, a100, settings):
    """Something on every page: requests in each state, a window and a job, metered
    usage with odd workload names, a webhook with a delivery, a token."""
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    start = next_week()
    pending = submit(vision, h100, alice, gpus=2, starts_at=start)
    approved = submit(vision, h100, alice, gpus=1, starts_at=start)
    actions.approve(approved, by=admin_user)
    active = submit(vision, a100, carol, gpus=1, starts_at=None, hours=None)
    active.starts_at = start - timedelta(days=8)
    rejected = submit(nlp, a100, bob, gpus=1)
    actions.reject(rejected, by=admin_user, reason="no")
    submit(nlp, h100, bob, gpus=1)
    actions.comment(pending, by=alice, body="please")
    ImageRule.objects.create(prefix="nvcr.io/nvidia/")
    window = batch_actions.save_window(
        None,
        by=admin_user,
        capacity={h100: 4},
        name="Nights",
        timezone="Europe/Berlin",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor=Decimal("0.5"),
        spot_allowed=True,
    )
    batch_actions.submit(
        by=alice,
        team=vision,
        flavor=h100,
        window=window,
        name="train",
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=["python", "train.py"],
        gpus=1,
        expected_runtime_minutes=60,
        max_runtime_minutes=90,
    )
    # A job of NLP's held by its hard budget: the admin's release form is on its page.
    billing_actions.set_budget(nlp, Decimal("1"), by=admin_user, mode="hard")
    batch_actions.submit(
        by=bob,
        team=nlp,
        flavor=h100,
        name="held",
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=["python", "train.py"],
        gpus=2,
        expected_runtime_minutes=60,
        max_runtime_minutes=90,
    )
    from django.utils import timezone

    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    meter(
        hour,
        teams={(vision, h100): (7200, 3600, 3600, 0)},
        workloads={
            (vision, "vision", "Job", "train", h100): workload(3600, 1800, 1800, mean=0.4),
            (vision, "vision", "a/b", "=cmd|' /C calc'!A0", h100): workload(3600, 0, 3600),
            (vision, "vision", "Deployment", "notebook", h100): workload(3600, 0, 3600),
            (vision, "vision", "Deployment", "server", h100): workload(3600, 0, 3600),
        },
    )
    # Idle: a notebook scaled to zero ("Bring it back") and a server announced
    # ("Exempt it…", for its managers).
    idle = {"team": vision, "flavor": h100, "namespace": "vision", "kind": "Deployment"}
    IdleState.objects.create(
        **idle, name="notebook", gpus=1, seen_at=hour, idle_since=hour, announced_at=hour,
        action_due_at=hour, acted_at=hour,
    )  # fmt: skip
    IdleState.objects.create(
        **idle, name="server", gpus=1, seen_at=hour, idle_since=hour, announced_at=hour,
        action_due_at=hour + timedelta(days=1),
    )  # fmt: skip
    hook_actions.set_webhook(vision, "http://127.0.0.1:9/hook", by=carol)
    hook_actions.set_webhook(None, "http://127.0.0.1:9/admins", by=admin_user)
    hook_actions.send_test(vision, by=carol)
    # Nothing listens on the discard port: one attempt, and the delivery has failed.
    settings.PORTAL_WEBHOOK_MAX_ATTEMPTS = 1
    hook_actions.deliver(hook_actions.send_test(None, by=admin_user).pk)
    # Quota held now, which its team may give back ("End quota now…"), and a team's
    # idle policy ("Remove" on the policies page).
    now_held = submit(nlp, a100, bob, gpus=1, starts_at=timezone.now())
    actions.approve(now_held, by=admin_user)
    idle_actions.set_policy(a100, nlp, by=admin_user, idle_minutes=30, grace_minutes=10)
    token_actions.create_token(alice, name="laptop", days=30)
    token_actions.create_token(admin_user, name="ci", days=30)
    team_actions.archive_team(TeamFactory(slug="old", name="Old"), by=admin_user)
    return pending


def superuser():
    return UserFactory(username="root", is_staff=True, is_superuser=True)


# Longest walk first (make test starts these first, one a worker).
PERSONAS = ["admin_user", "superuser", "carol", "alice", "bob", "charlie", "anonymous"]


@pytest.mark.parametrize("who", PERSONAS)
def test_no_page_answers_500_to_hostile_input(world, request, who):
    client = Client(raise_request_exception=False)
    seeds = list(SEEDS)
    if who == "superuser":
        client.force_login(superuser())
        seeds = ADMIN_SEEDS
    elif who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    walk = Walk(client, who)
    got_request_exception.connect(walk.record)
    try:
        pages, forms = crawl(walk, seeds, admin=who == "superuser")
        hostile_queries(walk, pages)
        hostile_forms(walk, forms)
    finally:
        got_request_exception.disconnect(walk.record)
    print(
        who, walk.requests, "requests", len(pages), "pages", len(forms), "forms", sorted(walk.views)
    )
    # One line per cause (view and exception), with the first request that met it.
    causes = {}
    for failure in walk.failures:
        causes.setdefault(re.sub(r"[0-9]+", "N", failure.split(" {")[0]) + failure[-150:], failure)
    assert not walk.failures, f"{len(walk.failures)} server errors:\n" + "\n".join(causes.values())
    assert len(pages) > 3, pages
    if who == "admin_user":
        # The walk reaches every view of the portal's own pages (the admin's are the
        # superuser's), so a new page is fuzzed without being listed here.
        missing = sorted(portal_routes() - walk.views - NOT_REACHED_BY_ADMIN)
        assert not missing, missing


# Views an admin's walk does not reach, and why.
NOT_REACHED_BY_ADMIN = {
    "accounts/login/",  # signed in; the anonymous walk posts to it
    "requests/<int:pk>/cancel/",  # no request is theirs; alice's and carol's walks cancel
}


def portal_routes():
    """Routes of the portal's own HTML views (not the admin's, the API's or SSO's)."""
    routes = set()

    def walk(patterns, prefix=""):
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if hasattr(entry, "url_patterns"):
                walk(entry.url_patterns, route)
            elif not route.startswith(("admin/", "api/", "account/sso/", "accounts/")):
                routes.add(route)

    walk(get_resolver().url_patterns)
    return routes - {"metrics", "healthz", "readyz"}
