"""A November where vision holds 2 L4s it never uses (alice asked for them) and nlp
uses all of its 2 H100s: 24 metered hours from the 1st, through the same ingestion
as Prometheus answers (tests/billing/ledger.py)."""

from datetime import UTC, datetime, timedelta

from tests.billing.ledger import meter

START = datetime(2026, 11, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
HOURS = 24


def unused_month(grant, vision, nlp, alice, bob, l4, h100):
    """(vision's L4 request, nlp's H100 request), both active at NOW: vision left
    48 GPU-hours reserved and unallocated (48.00 USD at 1.00), nlp none."""
    end = START + timedelta(days=30)
    held = grant(vision, l4, 2, START, end, alice)
    used = grant(nlp, h100, 2, START, end, bob)
    for hour in range(HOURS):
        meter(START + timedelta(hours=hour), teams={(nlp, h100): (2 * 3600, 2 * 3600, 0, 0)})
    return held, used
