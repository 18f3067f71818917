"""Batch pages: calendar, job form (live estimate, errors), list, detail, cancel."""

import re
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from batch import actions
from batch.models import BatchJob


@pytest.fixture
def ready(allowlist, nightly, alice):
    return alice


def form_data(**overrides):
    data = {
        "name": "embed",
        "flavor": "",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": "python\nembed.py",
        "args": "--shard\n3",
        "env": "BATCH=64\nHF_TOKEN=secret:hf/token",
        "gpus": "1",
        "parallelism": "2",
        "completions": "4",
        "expected_runtime_minutes": "60",
        "max_runtime_minutes": "90",
        "priority": "0",
        "target": "",
    }
    return {**data, **overrides}


def test_it_submits_a_job_from_the_form(client, ready, vision, h100):
    client.force_login(ready)
    response = client.post(
        "/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk), follow=True
    )
    job = BatchJob.objects.get()
    assert response.redirect_chain[-1][0] == f"/batch/jobs/{job.pk}/"
    assert job.command == ["python", "embed.py"]
    assert job.env == [
        {"name": "BATCH", "value": "64"},
        {"name": "HF_TOKEN", "secret": {"name": "hf", "key": "token"}},
    ]
    assert b"Batch job #%d queued." % job.pk in response.content


def test_the_live_estimate_shows_both_prices(client, ready, vision, h100):
    client.force_login(ready)
    response = client.post("/batch/jobs/new/?validate=1", form_data(team=vision.pk, flavor=h100.pk))
    # 1 GPU x 2 pods x 1 h x 4.00 = 8.00 on demand; x 0.5 = 4.00
    assert b"4.00 USD" in response.content
    assert b"On demand the same job would cost 8.00 USD" in response.content


def test_form_errors_are_shown_by_their_fields(client, ready, vision, h100):
    client.force_login(ready)
    response = client.post(
        "/batch/jobs/new/",
        form_data(team=vision.pk, flavor=h100.pk, image="quay.io/x:1", env="PASSWORD=hunter2"),
    )
    assert response.status_code == 200
    assert b"not from an allowed registry" in response.content
    assert b"PASSWORD looks like a secret" in response.content
    assert not BatchJob.objects.exists()


def test_a_nul_in_an_environment_value_is_named_as_such(client, ready, vision, h100):
    client.force_login(ready)
    response = client.post(
        "/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk, env="BATCH=6\x004")
    )
    errors = response.content.decode().split('id="errors-env">')[1].split("</div>")[0]
    assert "BATCH: the value holds a NUL character" in errors
    assert "at most" not in errors
    assert not BatchJob.objects.exists()


def test_calendar_and_detail_show_the_plan(client, ready, vision, h100, admin_user):
    client.force_login(ready)
    client.post("/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk))
    actions.replan()
    job = BatchJob.objects.get()
    detail = client.get(f"/batch/jobs/{job.pk}/")
    assert job.explanation.encode() in detail.content
    assert b"vision/batch-%d" % job.pk in detail.content
    client.force_login(admin_user)
    calendar = client.get("/batch/")
    assert b"2 of 8" in calendar.content


def test_other_teams_cannot_see_or_cancel(client, ready, vision, h100, bob):
    client.force_login(ready)
    client.post("/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk))
    job = BatchJob.objects.get()
    client.force_login(bob)
    assert client.get(f"/batch/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/batch/jobs/{job.pk}/cancel/").status_code == 404
    assert client.post(f"/batch/jobs/{job.pk}/cancel/").status_code == 404
    assert b"embed" not in client.get("/batch/jobs/").content


def test_cancel_from_the_page_asks_first(client, ready, vision, h100):
    """The page's button is a link to a confirmation (no JavaScript needed), which
    holds the POST; a finished job has nothing to cancel."""
    client.force_login(ready)
    client.post("/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk))
    job = BatchJob.objects.get()
    detail = client.get(f"/batch/jobs/{job.pk}/").content.decode()
    assert f'href="/batch/jobs/{job.pk}/cancel/">Cancel job…</a>' in detail
    confirm = client.get(f"/batch/jobs/{job.pk}/cancel/").content.decode()
    assert f"Cancel batch job #{job.pk} (embed)?" in confirm
    assert "It leaves the plan" in confirm and 'name="reason"' in confirm
    assert f'href="/batch/jobs/{job.pk}/">Keep it</a>' in confirm
    job.refresh_from_db()
    assert job.status in BatchJob.PLANNABLE  # asking changed nothing

    response = client.post(f"/batch/jobs/{job.pk}/cancel/", {"reason": "wrong shard"}, follow=True)
    assert f"Batch job #{job.pk} cancelled." in response.content.decode()
    job.refresh_from_db()
    assert job.status == BatchJob.Status.CANCELLED
    assert job.events.get(action="cancel").reason == "wrong shard"

    again = client.get(f"/batch/jobs/{job.pk}/cancel/", follow=True).content.decode()
    assert "is cancelled: there is nothing to cancel" in again
    assert "Cancel job…" not in again


def test_batch_pages_and_the_form_speak_the_users_zone(client, ready, vision, h100, admin_user):
    """Nights open at 22:00 in New York: a Tokyo user sees 12:00 JST, never UTC."""
    client.force_login(ready)
    client.post("/preferences/", {"time_zone": "Asia/Tokyo"})
    form = client.get("/batch/jobs/new/").content.decode()
    assert re.search(r"Nights: \w{3} \d\d \w{3} 12:00 JST", form)
    client.post("/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk))
    actions.replan()
    job = BatchJob.objects.get()
    detail = client.get(f"/batch/jobs/{job.pk}/").content.decode()
    assert (
        f"{timezone.localtime(job.opens_at, ZoneInfo('Asia/Tokyo')):%Y-%m-%d} 12:00 JST" in detail
    )
    assert " UTC" not in detail
    calendar = client.get("/batch/").content.decode()
    assert "12:00 JST" in calendar and " UTC" not in calendar
    jobs = client.get("/batch/jobs/").content.decode()
    assert "JST" in jobs and " UTC" not in jobs


def test_the_flavor_menu_offers_flavors_with_a_window_and_says_when_it_opens(
    client, ready, vision, h100, a100
):
    client.force_login(ready)
    page = client.get("/batch/jobs/new/").content.decode()
    menu = page.split('name="flavor"')[1].split("</select>")[0]
    assert "H100 80GB" in menu and "A100" not in menu  # Nights sets aside H100s only
    assert re.search(
        r"H100 80GB · [^<]* · (next window \w{3} \d\d \w{3} \d\d:\d\d|a window is open now)", menu
    )


def test_the_calendar_is_a_week_per_flavor_with_the_planned_jobs_inside(
    client, ready, vision, h100, bob
):
    client.force_login(ready)
    client.post("/batch/jobs/new/", form_data(team=vision.pk, flavor=h100.pk))
    actions.replan()
    job = BatchJob.objects.get()
    page = client.get("/batch/").content.decode()
    week = page.split('id="calendar-h100"')[1].split("</section>")[0]
    days = re.findall(r'<div class="week-day">\s*<h3>([^<]+)</h3>', week)
    assert len(days) == 7
    assert (
        days[0] == f"{timezone.localdate():%a} {timezone.localdate().day} {timezone.localdate():%b}"
    )
    # Every night 22:00-06:00 in New York (03:00-11:00 UTC): a block a day, from now on.
    assert 6 <= week.count('class="block"') <= 7
    assert "<strong>Nights</strong>" in week and "</strong> of 8 GPUs" in week
    mine = re.search(rf'<a href="/batch/jobs/{job.pk}/" class="job mine" style="top: [\d.]+%', week)
    assert mine is not None
    assert "yours 100 %" in week
    assert "The next 14 days as a table" in week and "2 of 8" in week  # the table stays

    client.force_login(bob)  # another team: the job is there, unnamed, and not a link
    week = client.get("/batch/").content.decode().split('id="calendar-h100"')[1]
    assert f"/batch/jobs/{job.pk}/" not in week and "embed" not in week
    assert '<span class="job" style="top:' in week and "another team&#x27;s job" in week


def test_the_calendar_pages_through_the_planning_horizon_a_week_at_a_time(client, ready):
    client.force_login(ready)
    first = client.get("/batch/").content.decode()
    assert 'rel="next">next week →' in first and 'rel="prev"' not in first
    second = client.get("/batch/", {"week": "1"}).content.decode()
    assert 'rel="prev">← earlier week' in second and 'rel="next"' not in second
    last = client.get("/batch/", {"week": "99"}).content.decode()
    assert (
        last.split('aria-label="Week"')[1].split("</nav>")[0]
        == (second.split('aria-label="Week"')[1].split("</nav>")[0])
    )
    assert client.get("/batch/", {"week": "x"}).status_code == 200
