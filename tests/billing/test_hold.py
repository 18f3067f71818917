"""While Prometheus is being backfilled (the demo's history loading), closed hours
wait instead of being metered as zero, and the Spend pages say why."""

from billing import actions
from billing.models import IngestedHour


def test_closed_hours_wait_while_the_hold_file_exists(settings, tmp_path, db):
    hold = tmp_path / "history-loading"
    hold.write_text("Writing Prometheus blocks from 281 MiB of samples (2/3).\n")
    settings.PORTAL_BILLING_HOLD_FILE = str(hold)
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing there: never asked
    assert actions.ingest_closed_hours() == 0
    assert not IngestedHour.objects.exists()  # not even marked pending


def test_the_spend_pages_say_the_history_is_loading(client, alice, admin_user, settings, tmp_path):
    hold = tmp_path / "history-loading"
    hold.write_text("Generating 30 days of GPU samples from 2026-11-01 (1/3).\n")
    settings.PORTAL_BILLING_HOLD_FILE = str(hold)
    for user, url in ((alice, "/billing/teams/vision/"), (admin_user, "/billing/admin/")):
        client.force_login(user)
        page = client.get(url).content.decode()
        note = page.split('id="metering-on-hold">')[1].split("</div>")[0]
        assert "History is still loading:" in note
        assert "Generating 30 days of GPU samples from 2026-11-01 (1/3)." in note
    hold.unlink()
    assert b"metering-on-hold" not in client.get("/billing/admin/").content
