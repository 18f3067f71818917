"""The seams' migrations carry data over: archived teams stay archived, the
inventory's rows (an admin's capacity override) survive the move to `cluster`."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("gpu_requests", "0002_audit_outlives_requests"), ("provisioning", "0001_initial")]
ARCHIVED = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_archived_and_inventory_rows_carry_over():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old = migrate(BEFORE)
    Team = old.get_model("gpu_requests", "Team")
    Flavor = old.get_model("gpu_requests", "Flavor")
    vision = Team.objects.create(name="Vision", slug="vision")
    nlp = Team.objects.create(name="NLP", slug="nlp")
    old.get_model("provisioning", "TeamSync").objects.create(team=vision, archived_at=ARCHIVED)
    old.get_model("provisioning", "TeamSync").objects.create(team=nlp)
    h100 = Flavor.objects.create(
        name="H100", slug="h100", gpu_model="H100", memory_gb=80, capacity=12,
        price_per_gpu_hour=4,
    )  # fmt: skip
    old.get_model("provisioning", "FlavorCapacity").objects.create(
        flavor=h100, devices=16, override=12
    )

    new = migrate(latest)
    Team = new.get_model("teams", "Team")
    assert dict(Team.objects.values_list("slug", "archived_at")) == {
        "vision": ARCHIVED,
        "nlp": None,
    }
    capacity = new.get_model("cluster", "FlavorCapacity").objects.get()
    assert (capacity.flavor.slug, capacity.devices, capacity.override) == ("h100", 16, 12)
    assert "cluster_flavorcapacity" in connection.introspection.table_names()
