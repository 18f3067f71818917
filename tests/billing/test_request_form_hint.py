from datetime import UTC, datetime, timedelta
from decimal import Decimal

import time_machine
from django.utils import timezone

from billing import actions
from tests.billing.ledger import meter


def test_asking_for_more_of_an_idle_flavor_shows_the_idle_time(client, alice, vision, h100, a100):
    hour = actions.hour_floor(timezone.now()) - timedelta(days=2)
    meter(hour, teams={(vision, h100): (4 * 3600, 3600, 3 * 3600, 0)})
    client.force_login(alice)
    form = {"team": vision.pk, "flavor": h100.pk, "gpus": 2}
    page = client.post("/requests/new/?validate=1", form).content.decode()
    assert "Vision left 75 % of its H100 80GB time idle" in page
    assert "3 GPU-hours held below the activity threshold" in page
    # A flavor the team uses well (or not at all) gets no such note.
    page = client.post("/requests/new/?validate=1", {**form, "flavor": a100.pk}).content.decode()
    assert "time idle" not in page


def test_the_form_shows_the_cost_this_month_against_the_budget(client, alice, carol, vision, h100):
    now = datetime(2026, 6, 20, 12, tzinfo=UTC)
    with time_machine.travel(now, tick=False):
        meter(now - timedelta(hours=5), teams={(vision, h100): (4 * 3600, 4 * 3600, 0, 0)})
        actions.set_budget(vision, Decimal("500"), by=carol, mode="hard")
        client.force_login(alice)
        # 29 June to 2 July: 48 of its 72 hours are in June.
        form = {
            "team": vision.pk,
            "flavor": h100.pk,
            "gpus": 2,
            "starts_at": "2026-06-29T00:00",
            "ends_at": "2026-07-02T00:00",
        }
        page = client.post("/requests/new/?validate=1", form).content.decode()
        assert "Vision's budget: 500.00 USD a month" in page
        assert "484.00 USD left this month" in page  # 16.00 spent
        assert "would cost 384.00 USD before the month ends." in page  # 2 x 48 h x 4.00
        page = client.post("/requests/new/?validate=1", {**form, "gpus": 4}).content.decode()
        assert "would cost 768.00 USD before the month ends: " in page
        assert "284.00 USD past what is left" in page


def test_no_budget_no_budget_hint(client, alice, vision, h100):
    client.force_login(alice)
    with time_machine.travel(datetime(2026, 6, 20, 12, tzinfo=UTC), tick=False):
        form = {"team": vision.pk, "flavor": h100.pk, "gpus": 2, "starts_at": "2026-06-29T00:00"}
        page = client.post("/requests/new/?validate=1", form).content.decode()
    assert "Open-ended" in page  # the estimate is there
    assert "budget-hint" not in page
