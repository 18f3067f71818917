"""GPU-hours given back (or, report-only, that would have been) per team and
month: /api/v1/idle-savings/ and the team's Spend page."""

from datetime import UTC, datetime, timedelta

import pytest

from billing.models import Rate
from cluster.models import Flavor
from idle import actions
from idle.evaluation import Workload

T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)


@pytest.fixture
def would_have_saved(admin_user, vision, h100):
    """A 2-GPU notebook idle from minute 1, past its grace at minute 16 (report
    only), active again at minute 46: 2 GPUs x 30 minutes = 1 GPU-hour at 3.00."""
    Rate.objects.create(flavor=h100, effective_from=T0 - timedelta(days=30), price_per_gpu_hour=3)
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report")
    flavors = list(Flavor.objects.all())
    for minute in range(1, 47):
        activity = 0.6 if minute >= 46 else 0.01
        load = Workload("vision", "Deployment", "notebook", h100.pk, gpus=2, activity=activity)
        actions.apply_observations({load.key: load}, flavors, T0 + timedelta(minutes=minute))


def test_the_api_gives_the_months_figures_per_team(client, alice, bob, would_have_saved):
    client.force_login(alice)
    assert client.get("/api/v1/idle-savings/?month=2026-11").json() == [
        {
            "team": "vision",
            "month": "2026-11",
            "given_back_gpu_hours": "0.0000",
            "saving": "0.00",
            "would_give_back_gpu_hours": "1.0000",
            "would_save": "3.00",
            "currency": "USD",
        }
    ]
    assert client.get("/api/v1/idle-savings/?month=2026-10").json() == []
    client.force_login(bob)
    assert client.get("/api/v1/idle-savings/?month=2026-11").json() == []


@pytest.mark.parametrize("month", ["2026-13", "２０２６-11", "9" * 500, "-"])
def test_a_bad_month_is_a_400(client, alice, month):
    client.force_login(alice)
    response = client.get("/api/v1/idle-savings/", {"month": month})
    assert response.status_code == 400 and "month" in response.json()


def test_a_nul_in_the_month_is_a_400(client, alice):
    client.force_login(alice)
    response = client.get("/api/v1/idle-savings/", {"month": "2026-1\x001"})
    assert response.status_code == 400 and "NUL" in response.json()["detail"]


def test_the_spend_page_shows_it(client, alice, would_have_saved):
    client.force_login(alice)
    page = client.get("/billing/teams/vision/?month=2026-11").content.decode()
    assert 'id="idle-showback"' in page
    would = page.split('id="idle-would">')[1].split("</dd>")[0]
    assert would == "1 GPU-hours, 3.00 USD"
