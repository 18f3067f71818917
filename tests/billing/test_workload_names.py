"""A workload's owner kind and name are whatever a team member put in a pod's
ownerReferences: the Spend page links each one, and the link opens its card
(issue 17: a "/" made `{% url %}` raise, and the page answered 500 to the whole
team for the rest of the month)."""

import re
from datetime import UTC, datetime
from html import unescape

import pytest
import time_machine

from tests.billing.ledger import meter, workload

NOW = datetime(2026, 11, 10, 12, 30, tzinfo=UTC)
HOUR = datetime(2026, 11, 10, 9, tzinfo=UTC)

ODD = [
    ("Job", "a/b"),
    ("apps/v1/Thing", "train"),
    ("Job", ".."),
    ("Job", "."),
    ("Job", "50% done?#x"),
    ("Job", '=HYPERLINK("http://evil")'),
    ("Job", "tab\there"),
    ("Jöb", "ünïcode name"),
]


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.mark.parametrize(("kind", "name"), ODD)
def test_the_spend_page_links_a_workload_whatever_its_name(client, alice, vision, h100, kind, name):
    meter(
        HOUR,
        teams={(vision, h100): (3600, 0, 3600, 0)},
        workloads={(vision, "vision", kind, name, h100): workload(3600, 0, 3600)},
    )
    client.force_login(alice)
    page = client.get("/billing/teams/vision/")
    assert page.status_code == 200
    links = re.findall(r'href="(/billing/teams/vision/workloads/[^"]*)"', page.content.decode())
    assert len(set(links)) == 1  # the idle picture and the top idle list link the same card
    card = client.get(unescape(links[0]))
    assert card.status_code == 200
    assert name in unescape(card.content.decode())
