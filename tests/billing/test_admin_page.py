import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine

from billing import actions
from billing.models import TeamUsage
from tests.billing.ledger import meter

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)
MONTH = "?month=2026-11"


@pytest.fixture
def usage(vision, nlp, h100, carol, admin_user):
    with time_machine.travel(datetime(2026, 11, 1, tzinfo=UTC)):  # November's budget
        actions.set_budget(vision, Decimal("100"), by=admin_user)
    meter(
        HOUR,
        teams={
            (vision, h100): (8 * 3600, 2 * 3600, 6 * 3600, 0),
            (nlp, h100): (2 * 3600, 2 * 3600, 0, 0),
        },
        capacity={h100.pk: 16 * 3600},
    )


def test_it_is_for_platform_admins_only(client, alice):
    client.force_login(alice)
    assert client.get("/billing/admin/").status_code == 403


def test_every_team_in_a_sortable_table(client, admin_user, usage):
    client.force_login(admin_user)
    page = client.get(f"/billing/admin/{MONTH}&sort=idle&dir=desc").content.decode()
    assert page.index("Vision") < page.index("NLP")
    page = client.get(f"/billing/admin/{MONTH}&sort=team&dir=desc").content.decode()
    assert page.index(">Vision<") < page.index(">NLP<")
    assert "32 % of 100.00 USD" in page
    # An unknown column falls back to spend; a NUL is the edge's 400. Never a 500.
    assert client.get(f"/billing/admin/{MONTH}&sort=bogus&dir=sideways").status_code == 200
    assert client.get(f"/billing/admin/{MONTH}&sort=%00x").status_code == 400


def test_the_lines_add_up_to_the_capacity(client, admin_user, usage):
    client.force_login(admin_user)
    response = client.get(f"/billing/admin/{MONTH}&export=totals")
    lines = {
        row[0]: Decimal(row[1])
        for row in list(csv.reader(io.StringIO(response.content.decode())))[1:]
    }
    parts = [
        "team_allocated_gpu_hours",
        "team_reserved_unallocated_gpu_hours",
        "other_allocated_gpu_hours",
        "batch_set_aside_unused_gpu_hours",
        "unreserved_gpu_hours",
    ]
    assert sum(lines[p] for p in parts) == lines["capacity_gpu_hours"] == 16
    assert lines["unreserved_gpu_hours"] == 6


def test_csv_export_of_the_teams_table(client, admin_user, usage):
    client.force_login(admin_user)
    response = client.get(f"/billing/admin/{MONTH}&export=teams")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {row["slug"]: Decimal(row["cost"]) for row in rows} == {
        "vision": Decimal("32"),
        "nlp": Decimal("8"),
    }


def test_pending_hours_are_listed(client, admin_user, settings):
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"
    with pytest.raises(actions.prometheus.PrometheusUnavailable):
        actions.ingest_hour(HOUR)
    client.force_login(admin_user)
    page = client.get("/billing/admin/").content.decode()
    assert "1 hour pending" in page and "unreachable" in page
    assert not TeamUsage.objects.exists()


def test_query_count_is_pinned(client, admin_user, usage, django_assert_num_queries):
    client.force_login(admin_user)
    # 12, one for the newest metered hour (today's partial day in the charts) and
    # one for quota nobody uses (reports.unused_quota: none here, so no requests read).
    with django_assert_num_queries(14):
        client.get(f"/billing/admin/{MONTH}")
