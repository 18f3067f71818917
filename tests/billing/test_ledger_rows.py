"""Ledger rows written by `actions.write_hour`: a MIG slice priced by memory,
and late samples that recompute an hour already ingested."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing import actions
from billing.models import IngestedHour, TeamUsage
from tests.billing.ledger import meter

HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)


def test_a_mig_slice_priced_by_memory_is_its_share_of_the_parents_memory(catalog, nlp, admin_user):
    # 3g.40gb of an 80 GB A100 at 2.80: by memory 40/80 (1.40), not 3/7 (1.20).
    actions.add_rate(
        catalog["mig"],
        HOUR - timedelta(days=1),
        mig_parent=catalog["a100"],
        mig_basis="memory",
        by=admin_user,
    )
    meter(HOUR, teams={(nlp, catalog["mig"]): (3600, 3600, 0, 0)})
    assert TeamUsage.objects.get(hour=HOUR, team=nlp).price == Decimal("1.4000")


def test_late_samples_recompute_the_hour(vision, h100):
    assert meter(HOUR, teams={(vision, h100): (1800, 1800, 0, 0)}) is True
    # The same figures again: nothing written.
    assert meter(HOUR, teams={(vision, h100): (1800, 1800, 0, 0)}) is False
    # Samples that arrived late: the hour's rows are replaced, not added to.
    assert meter(HOUR, teams={(vision, h100): (3600, 2400, 1200, 0)}) is True
    (row,) = TeamUsage.objects.filter(hour=HOUR)
    assert (row.allocated_seconds, row.idle_seconds) == (3600, 1200)
    assert IngestedHour.objects.get(hour=HOUR).status == IngestedHour.Status.DONE
