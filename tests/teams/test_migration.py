"""Team and Membership moved from gpu_requests to teams on their tables (teams
0001, gpu_requests 0009, the other apps' foreign keys between): a database
with data migrates forward and back with every row, foreign key, permission
and audit event's subject intact."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType

from batch.models import BatchJob
from billing.models import Budget
from gpu_requests.models import QuotaRequest
from provisioning.models import TeamSync
from teams.models import AuditEvent, Membership, Team
from tests.migrating import migrate_back, migrate_forward

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Each app's last migration before the move; teams had none.
BEFORE = [
    ("gpu_requests", "0008_dra_flavors"),
    ("batch", "0006_job_event_actions"),
    ("billing", "0004_dra_seconds"),
    ("cluster", "0005_dra_allocation"),
    ("idle", "0001_initial"),
    ("notifications", "0001_initial"),
    ("provisioning", "0003_teamsync_drifted"),
]
STARTS = datetime(2030, 1, 1, tzinfo=UTC)


def write_before_the_move(old):
    """A team with a manager holding a team permission, a quota request, audit
    events (one about the team itself, by its content type), a batch job, a
    sync row and a budget, written through the models as they were."""
    ContentType = old.get_model("contenttypes", "ContentType")
    team_type = ContentType.objects.get(app_label="gpu_requests", model="team")
    alice = old.get_model("auth", "User").objects.create(username="alice")
    alice.user_permissions.add(
        old.get_model("auth", "Permission").objects.get(
            content_type=team_type, codename="change_team"
        )
    )
    vision = old.get_model("gpu_requests", "Team").objects.create(name="Vision", slug="vision")
    old.get_model("gpu_requests", "Membership").objects.create(
        team=vision, user=alice, role="manager"
    )
    h100 = old.get_model("gpu_requests", "Flavor").objects.create(
        name="H100", slug="h100", gpu_model="H100", memory_gb=80, capacity=8,
        price_per_gpu_hour=4,
    )  # fmt: skip
    request = old.get_model("gpu_requests", "QuotaRequest").objects.create(
        team=vision, flavor=h100, gpus=2, starts_at=STARTS, justification="Training",
        requested_by=alice,
    )  # fmt: skip
    AuditEvent = old.get_model("gpu_requests", "AuditEvent")
    AuditEvent.objects.create(team=vision, quota_request=request, actor=alice, action="submit")
    AuditEvent.objects.create(
        team=vision, actor=alice, action="team_create", subject_type=team_type,
        subject_id=str(vision.pk),
    )  # fmt: skip
    old.get_model("batch", "BatchJob").objects.create(
        team=vision, name="train", flavor=h100, image="trainer:1", gpus=1,
        expected_runtime_minutes=30, max_runtime_minutes=60, estimated_cost=2,
        on_demand_cost=2, created_by=alice,
    )  # fmt: skip
    old.get_model("provisioning", "TeamSync").objects.create(team=vision)
    old.get_model("billing", "Budget").objects.create(team=vision, monthly_amount=1000)


@pytest.mark.django_db(transaction=True)
def test_rows_keys_and_audit_subjects_survive_the_move_and_its_reverse():
    # Made after the database's last migration, as on a deployed portal.
    ContentType.objects.get_for_models(Team, Membership)
    try:
        old = migrate_back([("teams", None), *BEFORE], state=BEFORE)
        write_before_the_move(old)

        migrate_forward()
        vision = Team.objects.get(slug="vision")
        alice = get_user_model().objects.get(username="alice")
        assert Membership.objects.get(team=vision).user == alice
        assert list(vision.members.all()) == [alice]
        assert list(alice.teams.all()) == [vision]
        assert QuotaRequest.objects.get().team == vision
        assert BatchJob.objects.get().team == vision
        assert TeamSync.objects.get().team == vision
        assert Budget.objects.get().team == vision
        created = AuditEvent.objects.get(action="team_create")
        assert (created.subject_type.app_label, created.subject_type.model) == ("teams", "team")
        assert created.subject == vision
        assert AuditEvent.objects.get(action="submit").subject.team == vision
        assert alice.has_perm("teams.change_team")
        assert set(
            ContentType.objects.filter(model__in=["team", "membership"]).values_list(
                "app_label", flat=True
            )
        ) == {"teams"}

        old = migrate_back([("teams", None), *BEFORE], state=BEFORE)
        vision = old.get_model("gpu_requests", "Team").objects.get(slug="vision")
        assert list(vision.members.values_list("username", flat=True)) == ["alice"]
        assert vision.quota_requests.get().gpus == 2
        assert vision.batch_jobs.get().name == "train"
        created = old.get_model("gpu_requests", "AuditEvent").objects.get(action="team_create")
        assert (created.subject_type.app_label, created.subject_id) == (
            "gpu_requests",
            str(vision.pk),
        )
        assert (
            not old.get_model("contenttypes", "ContentType")
            .objects.filter(app_label="teams")
            .exists()
        )
    finally:
        migrate_forward()
