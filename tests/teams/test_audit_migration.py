"""AuditEvent moved from gpu_requests to teams on its table: first its quota
request became its generic subject (gpu_requests 0012 copies the key into the
subject, 0013 drops the column), then the model moved in the state only (teams
0003, gpu_requests 0014). A database with events of every kind migrates forward
and back with every row as it was, the content type's permission following."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db.models import ProtectedError

from batch.models import BatchJob, BatchJobEvent
from cluster.models import Flavor
from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent, Team
from tests.migrating import CATALOG, migrate_back, migrate_forward

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Each app's last migration before the move.
BEFORE = [
    ("gpu_requests", "0011_review_permission_moved_to_teams"),
    ("teams", "0002_review_permission"),
]
STARTS = datetime(2030, 1, 1, tzinfo=UTC)
FIELDS = ["pk", "team_id", "actor_id", "action", "from_status", "to_status", "reason"]


def write_before_the_move(old):
    """Two quota requests with their events (people's, the sweep's, a comment's),
    a team-level event about the team, a flavor's capacity change (no team), an
    event about a batch job and the job's own history row, and a user holding
    the audit list's permission, written through the models as they were."""
    ContentType = old.get_model("contenttypes", "ContentType")
    type_of = {
        model: ContentType.objects.get(app_label=app, model=model)
        for app, model in [
            ("gpu_requests", "auditevent"),
            ("teams", "team"),
            ("cluster", "flavor"),
            ("batch", "batchjob"),
        ]
    }
    User = old.get_model("auth", "User")
    alice = User.objects.create(username="alice")
    admin = User.objects.create(username="admin", is_superuser=True)
    alice.user_permissions.add(
        old.get_model("auth", "Permission").objects.get(
            content_type=type_of["auditevent"], codename="view_auditevent"
        )
    )
    vision = old.get_model("teams", "Team").objects.create(name="Vision", slug="vision")
    h100 = old.get_model("cluster", "Flavor").objects.create(
        name="H100", slug="h100", gpu_model="H100", memory_gb=80, capacity=8,
        price_per_gpu_hour=4,
    )  # fmt: skip
    QuotaRequest = old.get_model("gpu_requests", "QuotaRequest")
    held, asked = (
        QuotaRequest.objects.create(
            team=vision,
            flavor=h100,
            gpus=gpus,
            starts_at=STARTS,
            justification="Training",
            requested_by=alice,
        )  # fmt: skip
        for gpus in (2, 1)
    )
    AuditEvent = old.get_model("gpu_requests", "AuditEvent")
    write = AuditEvent.objects.create
    write(team=vision, quota_request=held, actor=alice, action="submit", to_status="pending")
    write(team=vision, quota_request=held, actor=admin, action="approve", from_status="pending",
          to_status="approved", reason="fits")  # fmt: skip
    write(team=vision, quota_request=held, action="activate", from_status="approved",
          to_status="active")  # fmt: skip
    write(team=vision, quota_request=asked, actor=alice, action="submit", to_status="pending")
    write(team=vision, quota_request=asked, actor=alice, action="comment", from_status="pending",
          to_status="pending", reason="Could it start earlier?")  # fmt: skip
    write(team=vision, actor=admin, action="team_create", subject_type=type_of["team"],
          subject_id=str(vision.pk), reason="Vision")  # fmt: skip
    write(team=None, actor=admin, action="change_capacity", subject_type=type_of["flavor"],
          subject_id=str(h100.pk), reason="H100: 8 -> 6 GPUs")  # fmt: skip
    job = old.get_model("batch", "BatchJob").objects.create(
        team=vision, name="train", flavor=h100, image="trainer:1", gpus=1,
        expected_runtime_minutes=30, max_runtime_minutes=60, estimated_cost=2,
        on_demand_cost=2, created_by=alice,
    )  # fmt: skip
    write(team=vision, actor=alice, action="comment", subject_type=type_of["batchjob"],
          subject_id=str(job.pk), reason="about a batch job")  # fmt: skip
    old.get_model("batch", "BatchJobEvent").objects.create(
        job=job, actor=alice, action="submit", to_status="queued"
    )


def rows(AuditEvent, *subject):
    """Every event's fields and `subject` (field names), in order."""
    return list(AuditEvent.objects.order_by("pk").values_list(*FIELDS, *subject))


SUBJECT = ["subject_type__app_label", "subject_type__model", "subject_id"]


@pytest.mark.django_db(transaction=True)
def test_every_event_keeps_its_subject_through_the_move_and_its_reverse():
    # Made after the database's last migration, as on a deployed portal.
    ContentType.objects.get_for_models(AuditEvent, QuotaRequest, Team, Flavor, BatchJob)
    try:
        old = migrate_back([*BEFORE, CATALOG], state=BEFORE)
        write_before_the_move(old)
        before = rows(old.get_model("gpu_requests", "AuditEvent"), "quota_request_id", *SUBJECT)
        assert [row[len(FIELDS)] is not None for row in before] == [True] * 5 + [False] * 3

        migrate_forward()
        # A quota request's key is its subject now; the other subjects are as they were.
        n = len(FIELDS)
        assert rows(AuditEvent, *SUBJECT) == [
            (*row[:n], *(("gpu_requests", "quotarequest", str(row[n])) if row[n] else row[n + 1 :]))
            for row in before
        ]
        held, asked = QuotaRequest.objects.order_by("-gpus")
        vision = Team.objects.get(slug="vision")
        job = BatchJob.objects.get()
        assert [e.action for e in held.events.all()] == ["submit", "approve", "activate"]
        assert [e.action for e in asked.events.all()] == ["submit", "comment"]
        assert AuditEvent.objects.get(action="team_create").subject == vision
        assert AuditEvent.objects.get(action="change_capacity").subject == Flavor.objects.get()
        assert AuditEvent.objects.get(reason="about a batch job").subject == job
        assert list(BatchJobEvent.objects.values_list("job", "action")) == [(job.pk, "submit")]
        with pytest.raises(ProtectedError):
            held.delete()
        alice = get_user_model().objects.get(username="alice")
        assert alice.has_perm("teams.view_auditevent")
        assert list(
            ContentType.objects.filter(model="auditevent").values_list("app_label", flat=True)
        ) == ["teams"]

        old = migrate_back([*BEFORE, CATALOG], state=BEFORE)
        AuditEventBefore = old.get_model("gpu_requests", "AuditEvent")
        assert rows(AuditEventBefore, "quota_request_id", *SUBJECT) == before
        assert list(
            old.get_model("contenttypes", "ContentType")
            .objects.filter(model="auditevent")
            .values_list("app_label", flat=True)
        ) == ["gpu_requests"]
    finally:
        migrate_forward()
