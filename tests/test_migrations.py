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


@pytest.mark.django_db(transaction=True)
def test_one_cluster_installation_becomes_the_default_cluster_and_back():
    """Flavors made before clusters belong to `default`, reached through the settings
    as before; migrating back drops the clusters and keeps the flavors."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old = migrate([("cluster", "0010_capacity_can_run")])
    Flavor = old.get_model("cluster", "Flavor")
    for slug in ("h100", "a100"):
        Flavor.objects.create(
            name=slug.upper(), slug=slug, gpu_model=slug, memory_gb=80, capacity=8,
            price_per_gpu_hour=3,
        )  # fmt: skip

    new = migrate(latest)
    Cluster = new.get_model("cluster", "Cluster")
    default = Cluster.objects.get()
    assert (default.slug, default.name, default.kubeconfig, default.prometheus_url) == (
        "default",
        "default",
        "",
        "",
    )
    flavors = new.get_model("cluster", "Flavor").objects.order_by("slug")
    assert [(f.slug, f.cluster_id) for f in flavors] == [("a100", default.pk), ("h100", default.pk)]

    back = migrate([("cluster", "0010_capacity_can_run")])
    flavors = back.get_model("cluster", "Flavor").objects.order_by("slug")
    assert [f.slug for f in flavors] == ["a100", "h100"]
    assert "cluster_cluster" not in connection.introspection.table_names()
    migrate(latest)
