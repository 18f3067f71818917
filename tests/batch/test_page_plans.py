"""The batch job list and calendar read what they show: PostgreSQL's plan for each serves
the page from an index, with no sort of the whole history (bench/batch_pages.py
times them at 2,000 and 20,000 rows). Sequential scans and sorts are switched off so
the plan does not depend on how few rows a test has: on two rows a sort costs nothing,
and CI's planner once read a team's jobs by its foreign key and sorted them. With sorts
off the planner still sorts when no index gives the order, and the test sees it.

Which of two sorted indexes serves a team's page is a question of how many teams share
the table, so that test has a history of twenty teams, analyzed: on an empty table CI's
planner once walked everyone's newest jobs and filtered them for the team."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from batch import actions as batch_actions
from batch import calendar
from batch.api import filter_jobs, visible_jobs
from batch.models import BatchJob
from tests.factories import TeamFactory

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def index_only(db):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")


@pytest.fixture
def twenty_teams_history(vision, h100, admin_user):
    """A hundred jobs for each of twenty teams, vision among them, with fresh statistics."""
    teams = [vision, *(TeamFactory() for _ in range(19))]
    BatchJob.objects.bulk_create(
        BatchJob(
            team=team,
            name=f"job-{n}",
            flavor=h100,
            image="nvcr.io/nvidia/pytorch:24.01-py3",
            gpus=1,
            expected_runtime_minutes=60,
            max_runtime_minutes=120,
            estimated_cost=1,
            on_demand_cost=2,
            created_by=admin_user,
        )
        for team in teams
        for n in range(100)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE batch_batchjob")


def plan(queryset):
    return queryset.explain()


def test_the_job_list_reads_the_newest_jobs_from_an_index(index_only, admin_user):
    jobs = filter_jobs(visible_jobs(admin_user), {})[:50]
    assert "batch_job_newest" in plan(jobs)
    assert "Sort" not in plan(jobs)


def test_a_teams_job_list_reads_its_newest_jobs_from_an_index(
    index_only, admin_user, twenty_teams_history
):
    jobs = filter_jobs(visible_jobs(admin_user), {"team": "vision"})[:50]
    assert "batch_job_team_newest" in plan(jobs)
    assert "Sort" not in plan(jobs)


def test_the_calendar_reads_the_jobs_of_the_openings_it_shows(index_only, nightly):
    now = timezone.now()
    windows = batch_actions.windows_with_occurrences(now, now + timedelta(days=14))
    found = plan(calendar.planned_jobs(windows))
    # From an index on the window (batch_job_window_opening, or on a table this small
    # the planner may pick the window's foreign-key index), bounded by the openings.
    assert "Index Scan using batch_" in found or "Bitmap Index Scan on batch_" in found
    assert "opens_at" in found
