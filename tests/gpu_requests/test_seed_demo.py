"""The demo's team holding unused quota holds it through the whole month of history
the demo loads, so "quota nobody uses" is on its pages whatever day the demo starts."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command

from billing import demo, reports
from billing.actions import reserved_seconds
from gpu_requests.models import QuotaRequest
from tests.billing.ledger import meter


@pytest.mark.parametrize(
    "started",
    [
        datetime(2026, 12, 2, 10, 17, tzinfo=UTC),  # the Spend page shows November
        datetime(2026, 12, 20, 23, 59, tzinfo=UTC),
    ],
)
def test_speech_holds_its_unused_quota_from_before_the_history_starts(db, started):
    with time_machine.travel(started, tick=False):
        call_command("seed_demo", verbosity=0)
        start, end = demo.history_span(started)
        (held,) = QuotaRequest.objects.filter(team__slug="speech", status="active")
        assert held.starts_at <= start and held.ends_at > started
        assert reserved_seconds(start)[held.team_id, held.flavor_id] == 4 * 3600

        # Metered hours of the month the Spend page opens on, first and last of the
        # history, are hours of quota nobody used.
        month, _ = reports.Month.opened(None)
        for hour in (max(start, month.start), min(end, month.end) - timedelta(hours=1)):
            meter(hour)
        (row,) = reports.unused_quota(month, [held.team_id])[held.team_id]["rows"]
        assert row["reserved_unallocated_gpu_hours"] == 2 * 4
        assert row["requests"] == [held]
