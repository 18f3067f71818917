"""The reservation timeline: a server-side SVG Gantt chart per flavor."""

import re

from django.urls import reverse

from gpu_requests import actions
from tests.factories import next_week, submit

URL = reverse("timeline")


def test_it_draws_reservations_capacity_and_pending_apart(
    login, admin_user, vision, nlp, alice, bob, h100
):
    held = actions.approve(submit(vision, h100, alice, gpus=10), by=admin_user)
    waiting = submit(nlp, h100, bob, gpus=4, starts_at=next_week(days=2))
    page = login(admin_user).get(URL, {"flavor": "h100"}).content.decode()
    chart = page.split('<figure class="timeline" id="timeline-h100">')[1].split("</figure>")[0]
    assert "peak <strong>10</strong> of 16 GPUs reserved" in chart
    assert 'class="capacity-line"' in chart and 'class="reserved"' in chart
    reserved, pending = chart.split(">Pending, not counted")
    assert f"Vision · 10 GPUs · #{held.pk}" in reserved
    assert f"NLP · 4 GPUs · #{waiting.pk}" in pending and 'class="bar pending"' in pending
    assert f'href="/requests/{held.pk}/"' in reserved


def test_members_see_their_teams_bars_and_everyones_total(
    login, admin_user, vision, nlp, alice, bob, h100
):
    actions.approve(submit(nlp, h100, bob, gpus=6), by=admin_user)
    mine = actions.approve(submit(vision, h100, alice, gpus=2), by=admin_user)
    page = login(alice).get(URL).content.decode()
    assert "peak <strong>8</strong> of 16" in page
    assert f"Vision · 2 GPUs · #{mine.pk}" in page
    assert "NLP" not in page


def test_over_capacity_is_said_in_words(login, admin_user, vision, alice, h100):
    actions.approve(submit(vision, h100, alice, gpus=10), by=admin_user)
    h100.capacity = 8
    h100.save()
    page = login(admin_user).get(URL).content.decode()
    assert "(over capacity)" in page


def test_an_unknown_flavor_shows_the_first(login, alice, h100):
    response = login(alice).get(URL, {"flavor": "nope"})
    assert response.status_code == 200
    assert 'id="timeline-h100"' in response.content.decode()


def test_open_ended_and_long_requests_run_off_the_right_edge(
    login, admin_user, vision, alice, h100
):
    actions.approve(
        submit(vision, h100, alice, gpus=1, starts_at=next_week(days=1), hours=None),
        by=admin_user,
    )
    page = login(admin_user).get(URL).content.decode()
    assert "GPUs · #" in page and " →</text>" in page


def test_a_batch_window_is_one_named_row_with_a_segment_per_opening(
    login, admin_user, alice, vision, h100
):
    from datetime import time

    from batch import actions as batch_actions

    batch_actions.save_window(
        None,
        by=admin_user,
        capacity={h100: 4},
        name="Nights",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
    )
    actions.approve(submit(vision, h100, alice, gpus=2), by=admin_user)
    for user in (admin_user, alice):  # members see the windows too
        page = login(user).get(URL).content.decode()
        chart = page.split('id="timeline-h100"')[1].split("</figure>")[0]
        segments = chart.count('class="bar window"')
        assert 28 <= segments <= 29  # a night a day for four weeks
        rows = set(
            re.findall(
                r'<g class="bar window">\s*<title>[^<]*</title>\s*<rect [^>]*y="([\d.]+)"', chart
            )
        )
        assert len(rows) == 1  # one row
        # Named once, on the line above its segments (shortened for phones).
        assert chart.count('class="full">Nights (batch window) · 4 GPUs</text>') == 1
        assert chart.count('class="short" aria-hidden="true">Nights (batch window) ·…</text>') == 1
        assert "Nights (batch window) · 4 GPUs: " in chart  # every segment's tooltip
        assert "Vision · 2 GPUs · #" in chart
        legend = chart.split('aria-label="Legend"')[1]
        assert "a batch window: one row, a segment per opening" in legend
        assert "pending, not counted" in legend
