"""Two "Bring it back" clicks at once restore the workload once: one log row,
one audit event, and the second caller told it was already done.

Both used to pass the check on the state each had read, both asked the
cluster, and both logged and audited a restore. Only PostgreSQL shows this;
each thread has its own connection and a barrier starts them together.
"""

from datetime import UTC, datetime

import pytest

from idle import actions
from idle.models import IdleAction, IdleAuditAction, IdleState
from idle.workloads import PREVIOUS_REPLICAS
from teams.errors import IllegalTransition
from teams.models import AuditEvent
from tests.api.test_concurrent_approval import run_together
from tests.factories import FlavorFactory, TeamFactory, UserFactory, add_member
from tests.idle.test_scale_to_zero import deployment

pytestmark = pytest.mark.postgres

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


@pytest.fixture
def scaled(transactional_db, cluster):
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}},
        field_manager="tests",
    )
    cluster.apply(deployment("notebook", 0, {PREVIOUS_REPLICAS: "2"}), field_manager="tests")
    team = TeamFactory(slug="vision", name="Vision")
    members = [add_member(team, UserFactory(username=name)) for name in ("alice", "carol")]
    flavor = FlavorFactory(slug="h100", name="H100 80GB", capacity=16)
    state = IdleState.objects.create(
        team=team,
        flavor=flavor,
        namespace="vision",
        kind="Deployment",
        name="notebook",
        gpus=2,
        seen_at=HOUR,
        idle_since=HOUR,
        announced_at=HOUR,
        action_due_at=HOUR,
        acted_at=HOUR,
        previous_replicas=2,  # what the portal recorded when it scaled it down
    )
    return state, members


def test_two_clicks_at_once_bring_it_back_once(scaled, cluster):
    state, members = scaled

    def work(i):
        # Each request reads the state itself, as the view and the API do.
        return actions.bring_back(
            IdleState.objects.select_related("team").get(pk=state.pk), by=members[i]
        )

    results = run_together(work, 2)
    assert sorted(results, key=lambda r: isinstance(r, Exception))[0] == 2, results
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], IllegalTransition), results
    assert "already brought back" in str(refused[0])
    assert IdleAction.objects.filter(kind=IdleAction.Kind.RESTORED).count() == 1
    assert AuditEvent.objects.filter(action=IdleAuditAction.BRING_BACK).count() == 1
    assert cluster.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
    assert not IdleState.objects.exists()
