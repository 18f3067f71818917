"""Why is my job waiting: the reason, when it starts, who is ahead and what would
start it sooner, on the job's page and in the API (batch/waiting.py)."""

from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine

from batch import actions, eta, history
from batch.models import BatchJob
from tests.api.conftest import client_for
from tests.batch.conftest import job_data

URL = "/api/v1/batch-jobs/"
# Monday 1 June 2026, noon in New York: the Nights window (22:00-06:00) opens at 22:00.
NOON = datetime(2026, 6, 1, 16, tzinfo=UTC)
TONIGHT = datetime(2026, 6, 2, 2, tzinfo=UTC)
TOMORROW_NIGHT = TONIGHT + timedelta(days=1)


@pytest.fixture
def crowded(allowlist, nightly, alice, bob, admin_user, a100):
    """Tonight's 8 H100: Vision's 4-GPU job is served first (a lower share, then the
    team order), so NLP's 6-GPU 8-hour job cannot start until 02:00 and, needing
    8 h, misses tonight. A100s have a window of their own, tonight too."""
    actions.save_window(
        None,
        by=admin_user,
        capacity={a100: 8},
        name="A100 nights",
        timezone="America/New_York",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=False,
    )
    with time_machine.travel(NOON, tick=False):
        small = client_for(alice).post(URL, job_data(gpus=4), format="json").json()
        big = (
            client_for(bob)
            .post(
                URL,
                job_data(
                    team="nlp",
                    name="pretrain",
                    gpus=6,
                    expected_runtime_minutes=480,
                    max_runtime_minutes=480,
                ),
                format="json",
            )
            .json()
        )
        actions.replan(reason="test")
        yield {"small": small["id"], "big": big["id"], "alice": alice, "bob": bob}


def at_noon(user, job_id):
    with time_machine.travel(NOON, tick=False):
        response = client_for(user).get(f"{URL}{job_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_job_behind_another_team_says_who_is_ahead_and_what_starts_it_sooner(crowded):
    body = at_noon(crowded["bob"], crowded["big"])
    assert body["status"] == "planned"
    assert body["eta"] == TOMORROW_NIGHT.isoformat().replace("+00:00", "Z")
    reason = body["waiting_reason"]
    assert reason["code"] == "capacity_taken"
    assert reason["occurrence"].startswith("Nights, Mon 01 Jun 22:00-06:00")
    assert reason["ahead"] == [{"team": "Vision", "jobs": 1, "gpus": 4}]
    assert (reason["share_position"], reason["share_teams"]) == (2, 2)
    assert "Ahead of it: Vision: 1 job (4 GPUs)." in reason["text"]
    # Half the GPUs fits beside Vision's job tonight; so does the A100 window.
    # A shorter maximum runtime is not offered: it already equals the expected one.
    tonight = TONIGHT.isoformat().replace("+00:00", "Z")
    assert [(a["change"], a["text"], a["eta"]) for a in body["alternatives"]] == [
        ("gpus", "With 3 GPUs per pod instead of 6", tonight),
        ("gpus", "With 1 GPU per pod instead of 6", tonight),
        ("flavor", "On A100 80GB instead of H100 80GB", tonight),
    ]


def test_the_job_served_first_waits_only_for_its_window(crowded):
    body = at_noon(crowded["alice"], crowded["small"])
    assert body["waiting_reason"]["code"] == "window_not_open"
    assert body["waiting_reason"]["ahead"] == []
    assert body["eta"] == TONIGHT.isoformat().replace("+00:00", "Z")
    assert body["alternatives"] == []


def test_a_job_that_cannot_finish_before_the_close_is_offered_its_expected_runtime(crowded):
    # 03:00 in New York, three hours before the close: 5 h at most does not fit;
    # its expected 2 h does, at once.
    late = TONIGHT + timedelta(hours=5)
    with time_machine.travel(late, tick=False):
        created = client_for(crowded["alice"]).post(
            URL,
            job_data(name="eval", gpus=1, expected_runtime_minutes=120, max_runtime_minutes=300),
            format="json",
        )
        body = client_for(crowded["alice"]).get(f"{URL}{created.json()['id']}/").json()
    assert body["waiting_reason"]["code"] == "not_before_close"
    assert body["eta"] == TOMORROW_NIGHT.isoformat().replace("+00:00", "Z")
    changes = {a["change"]: a["eta"] for a in body["alternatives"]}
    assert changes["max_runtime"] == late.isoformat().replace("+00:00", "Z")


def test_a_job_too_big_for_every_window_says_so(crowded):
    with time_machine.travel(NOON, tick=False):
        job = BatchJob.objects.get(pk=crowded["small"])
        # Three pods of 4 GPUs at once: 12 GPUs, and the windows give 8.
        BatchJob.objects.filter(pk=job.pk).update(parallelism=3, completions=3)
    body = at_noon(crowded["alice"], crowded["small"])
    assert body["waiting_reason"]["code"] == "too_big"
    assert body["eta"] is None
    # Three pods of 2 GPUs (6) fit tonight; the A100 window gives 8, not 12.
    tonight = TONIGHT.isoformat().replace("+00:00", "Z")
    assert [(a["text"], a["eta"]) for a in body["alternatives"]] == [
        ("With 2 GPUs per pod instead of 4", tonight),
        ("With 1 GPU per pod instead of 4", tonight),
    ]


def test_running_and_finished_jobs_have_no_waiting_reason(crowded):
    BatchJob.objects.filter(pk=crowded["small"]).update(status="running")
    body = at_noon(crowded["alice"], crowded["small"])
    assert (body["waiting_reason"], body["eta"], body["alternatives"]) == (None, None, [])


def test_the_job_page_explains_the_wait(client, crowded):
    client.force_login(crowded["bob"])
    with time_machine.travel(NOON, tick=False):
        page = client.get(f"/batch/jobs/{crowded['big']}/").content.decode()
    assert "Why it is not running yet" in page
    assert "Work ahead of it takes the capacity of an earlier occurrence." in page
    assert "Vision: 1 job, 4 GPUs" in page
    assert "NLP is in place 2 of 2 teams" in page
    assert "With 3 GPUs per pod instead of 6: starts" in page
    assert "On A100 80GB instead of H100 80GB: starts" in page


def test_the_eta_comes_with_a_range_from_the_prior_before_anything_started(crowded):
    body = at_noon(crowded["bob"], crowded["big"])
    # 34 h ahead: from now to 34 h + 1 h past the estimate (eta.PRIOR).
    assert body["eta_range"] == {
        "from": NOON.isoformat().replace("+00:00", "Z"),
        "to": (TOMORROW_NIGHT + timedelta(hours=35)).isoformat().replace("+00:00", "Z"),
        "confidence": 0.8,
        "samples": 0,
    }


def test_a_month_of_starts_calibrates_the_range(client, crowded):
    members = {user.memberships.get().team_id: user for user in (crowded["alice"], crowded["bob"])}
    with time_machine.travel(NOON, tick=False):
        history.month("demo", until=NOON, members=members)
    started = BatchJob.objects.filter(
        first_eta__isnull=False, started_at__gt=NOON - timedelta(days=30), started_at__lte=NOON
    ).count()
    assert started > eta.MIN_SAMPLES
    body = at_noon(crowded["bob"], crowded["big"])
    span = body["eta_range"]
    assert span["samples"] == started
    assert span["from"] <= body["eta"] <= span["to"]
    assert span["to"] != (TOMORROW_NIGHT + timedelta(hours=35)).isoformat().replace("+00:00", "Z")
    client.force_login(crowded["bob"])
    with time_machine.travel(NOON, tick=False):
        page = client.get(f"/batch/jobs/{crowded['big']}/").content.decode()
    assert f"measured on how {started} jobs started against their estimates" in page


def test_the_job_page_gives_the_start_as_a_range(client, crowded):
    client.force_login(crowded["alice"])
    with time_machine.travel(NOON, tick=False):
        page = client.get(f"/batch/jobs/{crowded['small']}/").content.decode()
    # Tonight 02:00 UTC, 10 h ahead: from now to 11 h past it.
    assert "between 2026-06-01 16:00 and 2026-06-02 13:00 UTC, 80 % of the time" in page
    assert "a first guess: too few jobs have started here to measure" in page


def test_the_first_estimate_is_kept_to_measure_the_start_against(crowded):
    small, big = (BatchJob.objects.get(pk=crowded[name]) for name in ("small", "big"))
    assert (small.first_eta, big.first_eta) == (TONIGHT, TOMORROW_NIGHT)
    # Tonight as the window opens the small job is gone: the big one is planned for
    # tonight, and its first estimate stays what it was.
    with time_machine.travel(TONIGHT, tick=False):
        BatchJob.objects.filter(pk=small.pk).update(status="cancelled", finished_at=TONIGHT)
        actions.replan(reason="test")
    big.refresh_from_db()
    assert big.planned_start == TONIGHT
    assert big.first_eta == TOMORROW_NIGHT
