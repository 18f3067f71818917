from datetime import timedelta

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
