"""Archiving a team ends its batch work: queued and planned jobs are cancelled,
released and running ones stopped through the same cancel (their Jobs deleted),
and the capacity they held goes to other teams' work at once: the plan and the
occurrences API say so right after the archive, before any tick."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from batch import actions, launch
from batch.models import BatchJob, PlannerState
from teams import actions as team_actions
from tests.api.conftest import client_for
from tests.batch.test_cluster import submit as submit_now
from tests.batch.test_cluster import watch_until

Status = BatchJob.Status
# A Monday noon in New York: the nights of `nightly` are all ahead.
MONDAY_NOON = datetime(2026, 6, 1, 16, 0, tzinfo=UTC)


def queue(team, user, flavor, **overrides):
    fields = {
        "name": "train",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "args": [],
        "env": [],
        "gpus": 8,
        "parallelism": 1,
        "completions": 1,
        "expected_runtime_minutes": 420,
        "max_runtime_minutes": 420,  # 7 of a night's 8 hours: one job a night
        "spot_allowed": False,
        "priority": 0,
    }
    return actions.submit(by=user, team=team, flavor=flavor, **{**fields, **overrides})


@pytest.fixture
def monday():
    with time_machine.travel(MONDAY_NOON, tick=False):
        yield


def test_an_archived_teams_planned_work_gives_its_night_to_the_next_team(
    monday, nightly, allowlist, nlp, bob, vision, alice, admin_user, h100, client
):
    nights = [o.opens_at for o in nightly.occurrences(MONDAY_NOON, MONDAY_NOON + timedelta(days=3))]
    first = queue(nlp, bob, h100, name="nlp-first", window=nightly, occurrence=nights[0])
    later = queue(nlp, bob, h100, name="nlp-later", window=nightly, occurrence=nights[2])
    waiting = queue(vision, alice, h100, name="vision-waits")
    actions.replan(reason="test")
    for job in (first, later, waiting):
        job.refresh_from_db()
    assert [(j.status, j.opens_at) for j in (first, later, waiting)] == [
        (Status.PLANNED, nights[0]),
        (Status.PLANNED, nights[2]),
        (Status.PLANNED, nights[1]),  # the first night is taken
    ]

    client.force_login(admin_user)
    response = client.post("/cluster/teams/nlp/archive/", {"reason": "Project ended"})
    assert response.status_code == 302

    for job in (first, later):
        job.refresh_from_db()
        assert job.status == Status.CANCELLED
        cancelled = job.events.get(action="cancel")
        assert cancelled.actor == admin_user
        assert cancelled.reason == "NLP was archived: Project ended"
    # No tick ran: the archive itself planned vision's job into the first night.
    waiting.refresh_from_db()
    assert (waiting.status, waiting.opens_at) == (Status.PLANNED, nights[0])
    found = client_for(alice).get(
        f"/api/v1/batch-windows/{nightly.pk}/occurrences/",
        {"from": MONDAY_NOON.isoformat(), "to": (MONDAY_NOON + timedelta(days=3)).isoformat()},
    )
    planned = [o["flavors"]["h100"] for o in found.json()]
    assert [(p["planned_gpus"], p["jobs"]) for p in planned] == [(8, 1), (0, 0), (0, 0)]


def test_an_archived_team_with_only_queued_work_runs_no_planner(
    monday, nightly, allowlist, nlp, bob, admin_user, h100
):
    queued = queue(nlp, bob, h100, name="nlp")
    assert queued.status == Status.QUEUED  # the planner has not run: nothing of it is planned
    team_actions.archive_team(nlp, by=admin_user, reason="")
    queued.refresh_from_db()
    assert queued.status == Status.CANCELLED
    assert queued.events.get(action="cancel").reason == "NLP was archived."
    assert not PlannerState.objects.filter(last_reason="team archived").exists()


def test_archiving_stops_the_teams_running_job_and_deletes_its_job(
    setup, demo_flavors, cluster, backend
):
    running = submit_now(setup, demo_flavors["h100"], annotations={"kubesim.io/duration": "2h"})
    actions.replan()
    launch.release_due()
    watch_until(running, {Status.RUNNING}, backend)
    assert cluster.get("Job", f"batch-{running.pk}", "vision") is not None

    team_actions.archive_team(setup["team"], by=setup["admin"], reason="Quota revoked")

    running.refresh_from_db()
    assert running.status == Status.CANCELLED
    assert running.finished_at is not None and running.used_gpu_seconds >= 0
    assert running.events.last().reason == "Vision was archived: Quota revoked"
    # Through the cancel's sync, as a member's cancel: its Job and pods go.
    assert cluster.get("Job", f"batch-{running.pk}", "vision") is None
    quota = cluster.get("ResourceQuota", "gpu-quota", "vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
