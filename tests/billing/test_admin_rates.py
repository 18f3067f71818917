"""The rate card in the Django admin: append-only, validated like the API."""

from decimal import Decimal

from billing.models import Rate


def test_an_admin_appends_a_rate_and_cannot_edit_it(client, admin_user, h100):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    form = {
        "flavor": h100.pk,
        "effective_from_0": "2026-12-01",
        "effective_from_1": "00:00:00",
        "price_per_gpu_hour": "5.25",
        "mig_basis": "",
    }
    response = client.post("/admin/billing/rate/add/", form)
    assert response.status_code == 302
    rate = Rate.objects.get()
    assert rate.price_per_gpu_hour == Decimal("5.25") and rate.created_by == admin_user
    # Off the hour, or a second rate for the same start: the form says why.
    page = client.post("/admin/billing/rate/add/", {**form, "effective_from_1": "00:30:00"})
    assert "Must be on the hour" in page.content.decode()
    page = client.post("/admin/billing/rate/add/", form)
    assert "already has a rate starting then" in page.content.decode()
    assert Rate.objects.count() == 1
    # No change or delete: history is never rewritten.
    change = client.post(
        f"/admin/billing/rate/{rate.pk}/change/", {**form, "price_per_gpu_hour": "1"}
    )
    assert change.status_code in (200, 403)
    assert Rate.objects.get().price_per_gpu_hour == Decimal("5.25")
    assert client.post(f"/admin/billing/rate/{rate.pk}/delete/", {"post": "yes"}).status_code == 403
