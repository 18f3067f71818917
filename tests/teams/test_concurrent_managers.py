"""Two managers acting at the same moment still leave their team a manager.

Each action locked only the membership it changed and then asked whether
another manager was left: two managers removing (or demoting) each other both
saw the other still there, and the team was left with none. Only PostgreSQL
shows this (SQLite runs one writer at a time); each thread has its own
connection and a barrier starts them together.
"""

import pytest

from teams import actions
from teams.errors import IllegalTransition, NotAllowed
from teams.models import Membership
from tests.api.test_concurrent_approval import run_together
from tests.factories import TeamFactory, UserFactory, add_member

pytestmark = pytest.mark.postgres

ROUNDS = 3


def two_managers(round_):
    team = TeamFactory(slug=f"vision{round_}", name=f"Vision {round_}")
    carol = add_member(team, UserFactory(username=f"carol{round_}"), role="manager")
    dave = add_member(team, UserFactory(username=f"dave{round_}"), role="manager")
    return team, [carol, dave]


def assert_one_manager_left(team, results, refusals=(IllegalTransition,)):
    managers = Membership.objects.filter(team=team, role=Membership.Role.MANAGER)
    assert managers.count() == 1, results
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1, results
    assert isinstance(refused[0], refusals), results


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_managers_removing_each_other_leave_one(transactional_db, round_):
    team, (carol, dave) = two_managers(round_)
    pairs = [(carol, dave), (dave, carol)]  # each removes the other

    def work(i):
        by, user = pairs[i]
        return actions.remove_member(team, user, by=by)

    # The second to go is no longer in the team: not allowed.
    assert_one_manager_left(team, run_together(work, 2), (NotAllowed,))


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_managers_demoting_themselves_leave_one(transactional_db, round_):
    team, managers = two_managers(round_)

    def work(i):
        return actions.set_role(team, managers[i], "member", by=managers[i])

    assert_one_manager_left(team, run_together(work, 2))


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_removal_and_a_demotion_at_once_leave_one(transactional_db, round_):
    team, (carol, dave) = two_managers(round_)

    def work(i):
        if i == 0:
            return actions.remove_member(team, dave, by=carol)
        return actions.set_role(team, carol, "member", by=carol)

    # Whichever goes second is refused: carol is no longer a manager (her
    # demotion went first), or dave's removal left her the last one.
    assert_one_manager_left(team, run_together(work, 2), (IllegalTransition, NotAllowed))
