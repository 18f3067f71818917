"""Each user's time zone: pages show times in it, forms read times in it, the database is UTC."""

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

from django.urls import reverse
from django.utils import timezone

from gpu_requests.models import QuotaRequest, UserPreference
from tests.factories import submit


def test_pages_show_times_in_the_users_zone_with_its_name(login, alice, vision, h100):
    client = login(alice)
    client.post(reverse("preferences"), {"time_zone": "Europe/Berlin"})
    assert UserPreference.objects.get(user=alice).time_zone == "Europe/Berlin"
    req = submit(vision, h100, alice, starts_at=timezone.now() + timedelta(days=3))
    page = client.get(reverse("request_detail", args=[req.pk])).content.decode()
    local = timezone.localtime(req.starts_at, timezone=ZoneInfo("Europe/Berlin"))
    assert f"{local:%Y-%m-%d %H:%M} {local.tzname()}" in page
    assert "Times are shown in Europe/Berlin" in page


def test_forms_read_times_in_the_users_zone(login, alice, vision, h100):
    client = login(alice)
    client.post(reverse("preferences"), {"time_zone": "America/New_York"})
    start = (
        (timezone.now() + timedelta(days=10))
        .astimezone(ZoneInfo("America/New_York"))
        .replace(hour=9, minute=0, second=0, microsecond=0)
    )
    page = client.get(reverse("request_new")).content.decode()
    assert "Starts (America/New_York)" in page
    client.post(
        reverse("request_new"),
        {
            "team": vision.pk,
            "flavor": h100.pk,
            "gpus": 1,
            "starts_at": f"{start:%Y-%m-%dT%H:%M}",
            "ends_at": f"{start + timedelta(hours=5):%Y-%m-%dT%H:%M}",
            "justification": "zones",
        },
    )
    saved = QuotaRequest.objects.get()
    assert saved.starts_at == start  # 09:00 in New York is 14:00 (or 13:00) UTC
    assert saved.starts_at.astimezone(UTC).hour in (13, 14)


def test_the_zone_is_loaded_at_login_and_unknown_zones_are_refused(client, alice):
    UserPreference.objects.create(user=alice, time_zone="Asia/Tokyo")
    client.force_login(alice)
    assert "Times are shown in Asia/Tokyo" in client.get("/").content.decode()
    response = client.post(reverse("preferences"), {"time_zone": "Mars/Olympus\x00"})
    assert response.status_code == 400
    assert UserPreference.objects.get(user=alice).time_zone == "Asia/Tokyo"


def test_without_a_zone_the_page_asks_the_browser(login, alice):
    page = login(alice).get("/").content.decode()
    assert "js/timezone.js" in page and "Times are shown in UTC" in page
