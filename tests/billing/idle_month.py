"""A month of the vision team as the idle dashboard should show it: a busy
trainer, a notebook idle 7 of its 8 hours a day on A100s, and 18 numbered
jobs of one shape that sat idle. Written through `write_hour`."""

from datetime import UTC, datetime

import pytest
import time_machine

from tests.billing.ledger import meter, workload

DAYS = range(1, 20)


def hour_of(day, hour):
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def vision_month(vision, nlp, h100, a100):
    for day in DAYS:
        for hour in range(9, 17):
            loads = {}
            if hour < 15:  # the trainer: four H100s, busy
                loads[(vision, "vision", "Job", "train", h100)] = workload(
                    4 * 3600, 4 * 3600, gpus=4, mean=0.85, fb_peak=60000
                )
            # The notebook: two A100s, busy the first hour, then idle.
            busy = hour == 9
            loads[(vision, "vision", "Pod", "notebook", a100)] = workload(
                2 * 3600,
                2 * 3600 if busy else 0,
                0 if busy else 2 * 3600,
                gpus=2,
                mean=0.4 if busy else 0.01,
                fb_peak=9000,
            )
            if day == 3 and 10 <= hour < 13:
                for number in range(18):
                    loads[(vision, "vision", "Job", f"sweep-{number}", h100)] = workload(
                        3600, 0, 3600, mean=0.01
                    )
            if hour == 12:
                loads[(nlp, "nlp", "Job", "eval", h100)] = workload(3600, 3600, mean=0.7)
            meter(hour_of(day, hour), teams=_team_sums(loads), workloads=loads)


def _team_sums(loads):
    sums = {}
    for (team, _, _, _, flavor), load in loads.items():
        total = sums.setdefault((team, flavor), [0, 0, 0, 0])
        for index, value in enumerate((load.allocated, load.active, load.idle, load.unmetered)):
            total[index] += value
    return {key: tuple(value) for key, value in sums.items()}


NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)  # the month's pages are read on this day


@pytest.fixture(autouse=True)
def _clock():
    """The pages are read on NOW, in every test module that imports this fixture."""
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def month(vision, nlp, h100, a100):
    vision_month(vision, nlp, h100, a100)
