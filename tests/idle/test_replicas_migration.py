"""idle 0005: the replicas a workload had before an idle scale-down move from the
object's annotation (which any member of the team can write) to its state in
the database, taken for the states already scaled down from the scale-down's
own log row, which the portal wrote."""

from datetime import UTC, datetime

import pytest

from idle.models import IdleState
from tests.migrating import CATALOG, migrate_back, migrate_forward

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BEFORE = [("idle", "0004_alter_exemption_reason")]
AT = datetime(2026, 11, 2, 10, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_scaled_down_states_get_the_replicas_their_log_row_says():
    try:
        old = migrate_back([*BEFORE, CATALOG], state=BEFORE)
        team = old.get_model("teams", "Team").objects.create(name="Vision", slug="vision")
        flavor = old.get_model("cluster", "Flavor").objects.create(
            slug="h100",
            name="H100",
            gpu_model="H100",
            memory_gb=80,
            capacity=8,
            price_per_gpu_hour=1,
        )
        State = old.get_model("idle", "IdleState")
        Action = old.get_model("idle", "IdleAction")
        common = {"team": team, "flavor": flavor, "namespace": "vision", "seen_at": AT}
        for name, acted_at in (("notebook", AT), ("infer", AT), ("idle-only", None)):
            State.objects.create(kind="Deployment", name=name, acted_at=acted_at, **common)
        log = {"team": team, "flavor": flavor, "namespace": "vision", "mode": "act", "at": AT}
        Action.objects.create(
            workload_kind="Deployment",
            workload_name="notebook",
            kind="scaled_to_zero",
            detail="Scaled to zero from 3 replica(s); Bring it back restores them.",
            **log,
        )
        # infer's scale-down was never logged (its worker died): nothing to take.

        migrate_forward()
        assert dict(IdleState.objects.values_list("name", "previous_replicas")) == {
            "notebook": 3,
            "infer": None,
            "idle-only": None,
        }
    finally:
        migrate_forward()
