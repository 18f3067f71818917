"""The planner, a pure function: examples for the rules and hypothesis for the guarantees."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch.planner import Hold, Job, Profile, Slot, plan

NOW = datetime(2026, 6, 1, tzinfo=UTC)
H = timedelta(hours=1)


def slot(day, capacity, hours=8, flavor=1, window=1, start_hour=20):
    opens = NOW + timedelta(days=day, hours=start_hour)
    return Slot(window, flavor, opens, opens + hours * H, capacity, f"night {day}")


def job(pk, team=1, gpus=1, hours=1, priority=0, flavor=1, **kwargs):
    return Job(
        pk, team, flavor, gpus, hours * H, priority, NOW + pk * timedelta(seconds=1), **kwargs
    )


def usage_over_time(result, slots_):
    """{slot key: [(start, end, gpus)]}"""
    by_slot = defaultdict(list)
    for placement in result.placements.values():
        by_slot[placement.slot.key].append(placement)
    return by_slot


def peak(intervals):
    points = sorted({t for s, e, _ in intervals for t in (s, e)})
    return max((sum(g for s, e, g in intervals if s <= t < e) for t in points), default=0)


def test_it_plans_in_time_not_only_in_count():
    # 4 GPUs for 8 h; four 4-GPU jobs of 2 h each run one after another.
    result = plan([slot(0, 4)], [job(n, gpus=4, hours=2) for n in range(1, 5)], now=NOW)
    starts = sorted(p.starts_at for p in result.placements.values())
    opens = slot(0, 4).opens_at
    assert starts == [opens, opens + 2 * H, opens + 4 * H, opens + 6 * H]


def test_a_job_that_cannot_finish_by_the_close_moves_to_the_next_that_fits():
    slots_ = [slot(0, 4, hours=4), slot(1, 4, hours=8)]
    result = plan(slots_, [job(1, gpus=2, hours=6)], now=NOW)
    assert result.placements[1].slot == slots_[1]
    assert result.explanation(1).startswith(
        "Did not fit night 0: 6 h needed, only 4 h in the window."
    )
    assert "Planned for night 1" in result.explanation(1)


def test_higher_priority_work_first_within_a_team_and_the_reason_in_words():
    slots_ = [slot(0, 4, hours=6), slot(1, 4, hours=6)]
    result = plan(slots_, [job(1, gpus=4, hours=4), job(2, gpus=4, hours=4, priority=5)], now=NOW)
    assert result.placements[2].slot == slots_[0]
    assert result.placements[1].slot == slots_[1]
    assert (
        "Did not fit night 0: 4 h needed, 2 h left for 4 GPUs after work of higher priority "
        "or smaller share." in result.explanation(1)
    )


def test_smaller_jobs_backfill_around_a_big_one():
    result = plan(
        [slot(0, 4, hours=4)],
        [job(1, gpus=3, hours=4), job(2, gpus=2, hours=1), job(3, gpus=1, hours=4)],
        now=NOW,
    )
    assert set(result.placements) == {1, 3}
    assert "Waiting for a later occurrence." in result.explanation(2)


def test_a_finished_job_frees_its_capacity_for_later_jobs():
    opens = slot(0, 4).opens_at
    early = Hold(1, 1, opens, opens, opens + H, 4)  # planned 4 h, ended after 1 h
    result = plan([slot(0, 4)], [job(1, gpus=4, hours=2)], now=opens, holds=[early])
    assert result.placements[1].starts_at == opens + H


def test_fair_shares_follow_weights_and_recent_usage():
    jobs = [job(n, team=1 + n % 2, gpus=1, hours=1) for n in range(1, 41)]
    result = plan([slot(0, 2, hours=8)], jobs, now=NOW, weights={1: 3, 2: 1})
    by_team = defaultdict(int)
    for job_id in result.placements:
        by_team[1 + job_id % 2] += 1
    assert by_team == {1: 12, 2: 4}

    result = plan([slot(0, 2, hours=8)], jobs, now=NOW, recent_usage={1: 8})
    by_team = defaultdict(int)
    for job_id in result.placements:
        by_team[1 + job_id % 2] += 1
    assert by_team == {1: 4, 2: 12}


def test_many_small_jobs_do_not_starve_a_team():
    many = [job(n, team=1, gpus=1, hours=1) for n in range(1, 200)]
    result = plan([slot(0, 2, hours=4)], [*many, job(999, team=2, gpus=2, hours=2)], now=NOW)
    assert 999 in result.placements


def test_a_job_bigger_than_any_window_says_so():
    result = plan([slot(0, 4)], [job(1, gpus=8)], now=NOW)
    assert result.placements == {}
    assert result.explanation(1).endswith("No window gives 8 GPUs of this flavor.")


def test_a_target_occurrence_is_the_only_one_tried():
    slots_ = [slot(0, 4), slot(1, 4)]
    result = plan(slots_, [job(1, target_opens_at=slots_[1].opens_at)], now=NOW)
    assert result.placements[1].slot == slots_[1]


def test_an_open_occurrence_plans_from_now():
    opens = slot(0, 4).opens_at
    result = plan([slot(0, 4)], [job(1, hours=2)], now=opens + 90 * timedelta(minutes=1))
    assert result.placements[1].starts_at == opens + 90 * timedelta(minutes=1)


def test_profile_keeps_steps():
    profile = Profile(0, 10, 4)
    profile.add(2, 5, 3)
    assert profile.earliest(2, 3, 0) == 5
    assert profile.earliest(1, 10, 0) == 0
    assert profile.longest_free(2, 0) == 5


# --- properties ---

jobs_strategy = st.lists(
    st.builds(
        lambda team, gpus, hours, priority, flavor: (team, gpus, hours, priority, flavor),
        st.integers(1, 4),
        st.integers(1, 6),
        st.integers(1, 10),
        st.integers(-2, 2),
        st.integers(1, 2),
    ),
    max_size=60,
)
slots_strategy = st.lists(
    st.tuples(st.integers(1, 8), st.integers(2, 12), st.integers(1, 2), st.integers(0, 23)),
    min_size=1,
    max_size=8,
)


def build(jobs_spec, slots_spec):
    jobs = [job(n + 1, t, g, h, p, flavor=f) for n, (t, g, h, p, f) in enumerate(jobs_spec)]
    slots_ = [
        slot(n, capacity, hours=hours, flavor=flavor, start_hour=hour)
        for n, (capacity, hours, flavor, hour) in enumerate(slots_spec)
    ]
    return jobs, slots_


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs_strategy, slots_strategy, st.integers(0, 30))
def test_never_over_capacity_never_past_the_close_and_deterministic(jobs_spec, slots_spec, late):
    jobs, slots_ = build(jobs_spec, slots_spec)
    now = NOW + timedelta(hours=late)
    result = plan(slots_, jobs, now=now)
    by_id = {j.id: j for j in jobs}
    for placements in usage_over_time(result, slots_).values():
        capacity = placements[0].slot.capacity
        intervals = [(p.starts_at, p.ends_at, by_id[p.job_id].gpus) for p in placements]
        assert peak(intervals) <= capacity
        for p in placements:
            assert p.slot.opens_at <= p.starts_at and p.starts_at >= now
            assert p.ends_at <= p.slot.closes_at
            assert p.ends_at - p.starts_at == by_id[p.job_id].runtime
            assert by_id[p.job_id].flavor_id == p.slot.flavor_id
    again = plan(list(reversed(slots_)), list(reversed(jobs)), now=now)
    assert again.placements == result.placements
    assert again.reasons == result.reasons


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)),
        min_size=1,
        max_size=80,
    ),
    st.integers(2, 6),
    st.integers(4, 10),
)
def test_no_team_with_fitting_work_waits_more_occurrences_than_there_are_teams(
    jobs_spec, capacity, hours
):
    jobs = [job(n + 1, team, min(g, capacity), h) for n, (team, g, h) in enumerate(jobs_spec)]
    slots_ = [slot(day, capacity, hours=hours) for day in range(12)]
    result = plan(slots_, jobs, now=NOW)
    teams = {j.team_id for j in jobs}
    placed = defaultdict(set)  # slot index -> teams served
    done_at = {}
    for p in result.placements.values():
        index = slots_.index(p.slot)
        placed[index].add(next(j.team_id for j in jobs if j.id == p.job_id))
        done_at[p.job_id] = index
    for team in teams:
        streak = 0
        for index in range(len(slots_)):
            # Work the team still had queued when this occurrence was planned.
            waiting = [
                j for j in jobs if j.team_id == team and done_at.get(j.id, len(slots_)) >= index
            ]
            if waiting and placed[index] and team not in placed[index]:
                streak += 1
                assert streak <= len(teams), f"team {team} starved for {streak} occurrences"
            else:
                streak = 0


def rounds(carry, count=4):
    """Plan night after night, each run 5 minutes before the night opens; a job
    planned for that night runs in it. Returns {night: teams whose work ran}."""
    jobs = [job(n, team=1, gpus=4, hours=7) for n in range(1, 11)]
    jobs.append(job(99, team=2, gpus=8, hours=7))  # the whole window: the first job in blocks it
    slots_ = [slot(day, 8, hours=8) for day in range(count + 2)]
    ran, waiting = {}, None
    for night in range(count):
        now = slots_[night].opens_at - timedelta(minutes=5)
        result = plan(
            slots_[night:], jobs, now=now, waiting=waiting, settle_until=now + timedelta(minutes=15)
        )
        if carry:
            again = plan(
                slots_[night:],
                jobs,
                now=now,
                waiting=result.waiting,
                settle_until=now + timedelta(minutes=15),
            )
            # A second run (a submission, a cancel) counts nothing twice, reorders nothing.
            assert again.placements == result.placements and again.waiting == result.waiting
            waiting = result.waiting
        tonight = {j for j, p in result.placements.items() if p.slot == slots_[night]}
        ran[night] = {j.team_id for j in jobs if j.id in tonight}
        jobs = [j for j in jobs if j.id not in tonight]
    return ran


def test_the_no_starvation_counter_is_carried_between_runs():
    # Each run alone puts team 1 first (tie at no usage, lower id); its first 4-GPU
    # job leaves no room for team 2's 8-GPU job, which the run then plans for the
    # next night. Carried, team 2's wait makes it first the next night.
    assert rounds(carry=True) == {0: {1}, 1: {2}, 2: {1}, 3: {1}}
    # Not carried, every run starts from zero and team 2 never gets a night.
    assert all(teams == {1} for teams in rounds(carry=False).values())
