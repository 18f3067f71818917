"""billing.actions.set_budget: atomic and audited like the other admin actions."""

from decimal import Decimal
from unittest import mock

import pytest

from billing import actions
from billing.models import Budget
from teams.models import AuditEvent, Membership
from tests.api.test_concurrent_approval import run_together
from tests.factories import TeamFactory, UserFactory, add_member, make_reviewer


def test_a_change_whose_audit_fails_is_not_kept(db):
    team = TeamFactory(slug="vision")
    admin = make_reviewer()
    actions.set_budget(team, Decimal("100"), by=admin)
    failing = mock.patch.object(AuditEvent, "record", side_effect=RuntimeError("audit down"))
    with failing, pytest.raises(RuntimeError):
        actions.set_budget(team, Decimal("200"), by=admin)
    assert Budget.objects.get(team=team).monthly_amount == Decimal("100")
    assert AuditEvent.objects.filter(team=team, action="budget_set").count() == 1


@pytest.mark.postgres
def test_changes_at_the_same_moment_each_audit_what_the_other_left(transactional_db):
    """Two managers set the first budget of a team at once: one waits for the
    other, so the history reads as one chain and ends at the budget kept."""
    team = TeamFactory(slug="vision")
    managers = [
        add_member(team, UserFactory(username=name), Membership.Role.MANAGER)
        for name in ("carol", "dave")
    ]
    amounts = [Decimal("100"), Decimal("200")]
    results = run_together(
        lambda i: actions.set_budget(team, amounts[i], by=managers[i]), len(managers)
    )
    assert not [r for r in results if isinstance(r, Exception)]
    reasons = list(
        AuditEvent.objects.filter(team=team, action="budget_set")
        .order_by("pk")
        .values_list("reason", flat=True)
    )
    first, second = (reason.split(" -> ") for reason in reasons)
    assert first[0] == "none" and second[0] == first[1]
    assert second[1] == f"{Budget.objects.get(team=team).monthly_amount:.2f} USD a month (soft)"
