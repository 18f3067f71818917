"""Flavor moved from gpu_requests to cluster on its table (cluster 0007,
gpu_requests 0010, the other apps' foreign keys between): a database with
data migrates forward and back with every row, foreign key, permission and
audit event's subject intact."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType

from batch.models import BatchJob
from cluster.models import Flavor, FlavorCapacity
from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent
from tests.migrating import migrate_back, migrate_forward

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Each app's last migration before the move.
BEFORE = [
    ("gpu_requests", "0009_team_moved_to_teams"),
    ("batch", "0007_team_moved_to_teams"),
    ("billing", "0005_team_moved_to_teams"),
    ("cluster", "0006_team_moved_to_teams"),
    ("idle", "0002_team_moved_to_teams"),
]
STARTS = datetime(2030, 1, 1, tzinfo=UTC)


def write_before_the_move(old):
    """A flavor with the inventory's row, an admin holding a catalog permission,
    a quota request, a batch job and audit events (one about the flavor itself,
    by its content type), written through the models as they were."""
    ContentType = old.get_model("contenttypes", "ContentType")
    flavor_type = ContentType.objects.get(app_label="gpu_requests", model="flavor")
    alice = old.get_model("auth", "User").objects.create(username="alice")
    alice.user_permissions.add(
        old.get_model("auth", "Permission").objects.get(
            content_type=flavor_type, codename="change_flavor"
        )
    )
    vision = old.get_model("teams", "Team").objects.create(name="Vision", slug="vision")
    h100 = old.get_model("gpu_requests", "Flavor").objects.create(
        name="H100", slug="h100", gpu_model="H100", memory_gb=80, capacity=8,
        price_per_gpu_hour=4,
    )  # fmt: skip
    old.get_model("cluster", "FlavorCapacity").objects.create(flavor=h100, devices=8, override=6)
    request = old.get_model("gpu_requests", "QuotaRequest").objects.create(
        team=vision, flavor=h100, gpus=2, starts_at=STARTS, justification="Training",
        requested_by=alice,
    )  # fmt: skip
    AuditEvent = old.get_model("gpu_requests", "AuditEvent")
    AuditEvent.objects.create(team=vision, quota_request=request, actor=alice, action="submit")
    AuditEvent.objects.create(
        team=None, actor=alice, action="change_capacity", subject_type=flavor_type,
        subject_id=str(h100.pk), reason="H100: 8 -> 6 GPUs. capacity override",
    )  # fmt: skip
    old.get_model("batch", "BatchJob").objects.create(
        team=vision, name="train", flavor=h100, image="trainer:1", gpus=1,
        expected_runtime_minutes=30, max_runtime_minutes=60, estimated_cost=2,
        on_demand_cost=2, created_by=alice,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_rows_keys_and_audit_subjects_survive_the_move_and_its_reverse():
    # Made after the database's last migration, as on a deployed portal.
    ContentType.objects.get_for_model(Flavor)
    try:
        old = migrate_back(BEFORE, state=BEFORE)
        write_before_the_move(old)

        migrate_forward()
        h100 = Flavor.objects.get(slug="h100")
        assert (h100.capacity, h100.price_per_gpu_hour) == (8, 4)
        assert FlavorCapacity.objects.get().flavor == h100
        assert h100.inventory.override == 6
        assert QuotaRequest.objects.get().flavor == h100
        assert list(h100.quota_requests.values_list("gpus", flat=True)) == [2]
        assert BatchJob.objects.get().flavor == h100
        changed = AuditEvent.objects.get(action="change_capacity")
        assert (changed.subject_type.app_label, changed.subject_type.model) == ("cluster", "flavor")
        assert changed.subject == h100
        assert AuditEvent.objects.get(action="submit").subject.flavor == h100
        alice = get_user_model().objects.get(username="alice")
        assert alice.has_perm("cluster.change_flavor")
        assert list(
            ContentType.objects.filter(model="flavor").values_list("app_label", flat=True)
        ) == ["cluster"]

        old = migrate_back(BEFORE, state=BEFORE)
        h100 = old.get_model("gpu_requests", "Flavor").objects.get(slug="h100")
        assert h100.quota_requests.get().gpus == 2
        assert old.get_model("batch", "BatchJob").objects.get().flavor_id == h100.pk
        assert old.get_model("cluster", "FlavorCapacity").objects.get().flavor_id == h100.pk
        changed = old.get_model("gpu_requests", "AuditEvent").objects.get(action="change_capacity")
        assert (changed.subject_type.app_label, changed.subject_id) == (
            "gpu_requests",
            str(h100.pk),
        )
        assert (
            not old.get_model("contenttypes", "ContentType")
            .objects.filter(app_label="cluster", model="flavor")
            .exists()
        )
    finally:
        migrate_forward()
