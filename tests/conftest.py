"""Personas, as in the healthchecks test suite: admin reviews quota; alice is
a member and carol the manager of team vision; bob is in team nlp; charlie
belongs to no team."""

import os
from decimal import Decimal

import pytest
from django.db import connection

from tests.clusters import (  # noqa: F401 (the cluster backends, for every test, defined once)
    backend,
    cluster,
    control_plane,
    namespace_policy,
    portal_rules,
)
from tests.factories import FlavorFactory, TeamFactory, UserFactory, add_member, make_reviewer
from tests.provisioning.conftest import eager  # noqa: F401 (tasks run inline, for every test)


@pytest.fixture
def vision(db):
    return TeamFactory(slug="vision", name="Vision")


@pytest.fixture
def nlp(db):
    return TeamFactory(slug="nlp", name="NLP")


@pytest.fixture
def admin_user(db):
    return make_reviewer("admin")


@pytest.fixture
def alice(vision):
    return add_member(vision, UserFactory(username="alice"))


@pytest.fixture
def carol(vision):
    return add_member(vision, UserFactory(username="carol"), role="manager")


@pytest.fixture
def bob(nlp):
    return add_member(nlp, UserFactory(username="bob"))


@pytest.fixture
def charlie(db):
    return UserFactory(username="charlie")


@pytest.fixture
def h100(db):
    return FlavorFactory(slug="h100", name="H100 80GB", capacity=16)


@pytest.fixture
def a100(db):
    return FlavorFactory(
        slug="a100",
        name="A100 80GB",
        gpu_model="NVIDIA A100 80GB PCIe",
        capacity=16,
        price_per_gpu_hour=Decimal("2.5000"),  # a str would stay a str on the instance
    )


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # PBKDF2 at its production cost is most of a test's setup time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _needs_postgresql(request):
    """Tests marked `postgres` exercise PostgreSQL itself (locks, a server that
    goes away): on `make test`'s SQLite default they skip, under CI=true fail."""
    if request.node.get_closest_marker("postgres") and connection.vendor != "postgresql":
        pytest.skip(f"needs PostgreSQL (DATABASE_URL=postgres://...), not {connection.vendor}")


# What makes a test slow: a real worker, Prometheus, Chromium, a cluster, or a
# long walk. `pytest -m "not slow"` leaves them out for a fast loop.
SLOW_MARKERS = ("browser", "celery", "prometheus")
SLOW_FIXTURES = {
    *("backend", "cluster", "control_plane", "deployed", "live_server"),
    *("workers", "webhook_workers", "month"),
}
# Modules that build an image, start gunicorn or brokers, or migrate from the first.
SLOW_MODULES = (
    "tests/deploy/test_image_recipe.py::",
    "tests/ops/",
    "tests/test_broker.py::",
    "tests/test_demo.py::",
    "tests/test_migrations.py::",
)


def pytest_collection_modifyitems(config, items):
    """A test marked `kubesim_only(why)` runs on kubesim alone: its real-cluster
    case is deselected (it needs kubesim's clock or fault injection); one marked
    `kubernetes_only(why)` runs on the real control plane alone (it needs what
    kubesim does not serve, such as resource.k8s.io). End-to-end tests are
    marked `slow`."""
    kept, dropped = [], []
    for item in items:
        if (
            any(item.get_closest_marker(name) for name in SLOW_MARKERS)
            or SLOW_FIXTURES & set(item.fixturenames)
            or item.nodeid.startswith((*SPREAD_FIRST, *SLOW_MODULES))
        ):
            item.add_marker(pytest.mark.slow)
        params = getattr(getattr(item, "callspec", None), "params", {})
        for name, other in (("kubesim_only", "kubernetes"), ("kubernetes_only", "kubesim")):
            marker = item.get_closest_marker(name)
            if marker is not None:
                assert marker.args, f"{item.nodeid}: {name} needs a reason"
                if params.get("backend") == other:
                    dropped.append(item)
                    break
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    _order_for_workers(items)


# The long walks (minutes each, one a persona) that go first, each alone, under
# `make test`'s `pytest -n 3 --dist loadgroup --no-loadscope-reorder`: started
# last, they would end the run alone on one worker.
SPREAD_FIRST = ("tests/edge/test_web_fuzzer.py::", "tests/api/test_schemathesis.py::")


def _order_for_workers(items):
    """The long walks first, then every other module's tests together (one worker
    makes its module fixtures once), the modules with most tests first."""
    first = [item for item in items if item.nodeid.startswith(SPREAD_FIRST)]
    modules = {}
    for item in items:
        if not item.nodeid.startswith(SPREAD_FIRST):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    rest = sorted(modules.values(), key=len, reverse=True)
    items[:] = first + [item for module in rest for item in module]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip is a failure: a missing service must not pass quietly."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and "xfail" not in report.keywords:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which needs every service: {reason}"


@pytest.fixture(scope="session")
def live_server(django_db_setup, live_server):
    # Depending on the test database makes the server (and its connection)
    # stop before the database is dropped.
    return live_server
