"""One format for money and GPU-hours: pages, the admin, emails and chart titles."""

from decimal import Decimal

from billing import actions as billing_actions
from billing import charts
from teams import formats


def test_money_has_two_decimals_and_the_currency():
    assert formats.money(Decimal("1234.5")) == "1,234.50 USD"
    assert formats.money(Decimal("0.005")) == "0.01 USD"
    assert formats.money(None) == ""


def test_gpu_hours_are_whole_when_whole_else_one_decimal():
    assert formats.gpu_hours(48) == "48"
    assert formats.gpu_hours(Decimal("1234.50")) == "1,234.5"
    assert formats.gpu_hours(None) == ""


def test_chart_titles_and_axes_use_the_same_hours():
    chart = charts.stacked_bars([{"label": "01", "active_gpu_hours": 1234.5}], "label")
    assert chart.bars[0]["title"] == "01: Active 1,234.5 GPU-hours"


def test_the_budget_admin_shows_money(client, admin_user, vision):
    billing_actions.set_budget(vision, Decimal("1500"), by=admin_user)
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    page = client.get("/admin/billing/budget/").content.decode()
    assert "1,500.00 USD" in page
