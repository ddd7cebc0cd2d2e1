"""The warm tier's pure rules for devices: the bill, how deep to sleep, where a pod goes, moves.

Covers: a device's use is serving with any pod awake or waking, starting with
none awake and one loading, sleeping-only with every pod asleep, and the
seconds add up; the depth rule keeps level 1 where a wake meets the
objective, takes level 2 when host memory is short, goes to zero for a model
unlikely to come back when its device costs it, and never picks a rung it
was not offered; a sleep under way counts for room once done; a busy model
keeps its slot when room to wake is kept, and a device whose busy models
fill it is holeless; a wake waits for a sleep under way rather than start
another; a new pod goes beside a serving model, a sleeper where no busy
model takes a place, a busy model to pair; a new pod may take the room to
wake of sleepers unlikely to be asked for meanwhile, and not of likely ones;
a device of sleepers is emptied by moves when cheaper than keeping it, and
kept otherwise; a sleeper where it cannot wake is rehomed where it can.
"""

from __future__ import annotations

import pytest

from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.warm_tier import (
    ZERO,
    GpuSeconds,
    GpuUse,
    Leaver,
    MoveCosts,
    PodUse,
    Resident,
    Rungs,
    Site,
    choose_depth,
    choose_site,
    gpu_use,
    holeless,
    keep_room_to_wake,
    pair_site,
    place_pod,
    plan_emptying,
    plan_rehoming,
    plan_wake,
)

AWAKE, ASLEEP = 28_000, 600
BUDGET = 81_920
NEED = AWAKE - ASLEEP
RUNGS = Rungs(wake_s={1: 0.9, 2: 2.2}, cold_start_s=60.0, wake_budget_s=1.8)


def res(
    pod: str,
    *,
    awake: bool = True,
    busy: bool = False,
    gap: float | None = None,
    p_soon: float = 0.0,
    draining: bool = False,
    free_at: float | None = None,
) -> Resident:
    return Resident(
        target=pod,
        pod=pod,
        awake=awake,
        busy=busy,
        used_mib=AWAKE if awake or draining else ASLEEP,
        idle_since_s=None if busy else 0.0,
        mean_gap_s=gap,
        free_at_s=free_at,
        p_soon=p_soon,
        draining_to_mib=ASLEEP if draining else None,
    )


def site(name: str, *residents: Resident, use: GpuUse = GpuUse.SERVING, slices: int = 16) -> Site:
    return Site(name, use, slices - len(residents), BUDGET, residents, 256 * 1024)


def gaps(every_s: float, *, n: int = 20, idle_s: float = 0.0) -> tuple[IdleGaps, float]:
    """A model asked for every ``every_s`` (n times), idle ``idle_s`` now; (gaps, now)."""
    g = IdleGaps(started_s=0.0)
    t = 0.0
    for _ in range(n):
        g = g.observe(busy=True, now=t).observe(busy=False, now=t + 0.1)
        t += every_s
    return g, t - every_s + 0.1 + idle_s


@pytest.mark.parametrize(
    ("uses", "expected"),
    [
        ((), None),
        ((PodUse.ASLEEP, PodUse.AWAKE), GpuUse.SERVING),
        ((PodUse.ASLEEP, PodUse.WAKING), GpuUse.SERVING),
        ((PodUse.ASLEEP, PodUse.STARTING), GpuUse.STARTING),
        ((PodUse.ASLEEP, PodUse.ASLEEP), GpuUse.SLEEPING_ONLY),
    ],
)
def test_a_device_does_what_its_busiest_pod_does(
    uses: tuple[PodUse, ...], expected: GpuUse | None
) -> None:
    assert gpu_use(uses) is expected


def test_device_seconds_add_up_by_use() -> None:
    s = GpuSeconds().add(GpuUse.SERVING, 10).add(GpuUse.SLEEPING_ONLY, 5).add(None, 99)
    assert (s.serving, s.starting, s.sleeping_only, s.total) == (10, 0, 5, 15)
    with pytest.raises(ValueError, match="seconds"):
        s.add(GpuUse.SERVING, -1)


def test_a_wake_within_the_objective_keeps_level_1_and_short_host_memory_level_2() -> None:
    g, now = gaps(300.0)
    assert choose_depth(g, rungs=RUNGS, now=now, device_share=0.0).rung == 1
    short = choose_depth(g, rungs=RUNGS, now=now, device_share=0.0, host_memory_free=False)
    assert short.rung == 2  # a level-2 wake misses, but less than a cold start does
    assert short.costs[2] < short.costs[ZERO]


def test_a_model_unlikely_back_goes_to_zero_when_its_device_costs_it() -> None:
    g, now = gaps(7_200.0, n=3, idle_s=20_000.0)
    alone = choose_depth(g, rungs=RUNGS, now=now, device_share=1.0, host_memory_free=False)
    assert alone.rung == ZERO
    beside = choose_depth(g, rungs=RUNGS, now=now, device_share=0.0, host_memory_free=False)
    assert beside.rung == 2  # its slot costs nothing beside a serving model
    only = choose_depth(g, rungs=RUNGS, now=now, device_share=1.0, allowed=(1,))
    assert only.rung == 1
    with pytest.raises(ValueError, match="no rung"):
        choose_depth(
            g, rungs=RUNGS, now=now, device_share=0.0, allowed=(1,), host_memory_free=False
        )


def test_a_busy_model_keeps_its_slot_and_a_device_it_fills_is_holeless() -> None:
    idle_busy = res("hot", gap=5.0)
    idle_cool = res("cool", gap=600.0)
    sleeper = res("s", awake=False)
    assert keep_room_to_wake(
        budget_mib=BUDGET, residents=[idle_busy, idle_cool, sleeper], wake_need_mib=NEED,
        busy_gap_s=60.0,
    ) == ("cool",)  # fmt: skip
    two_hot = [idle_busy, res("hot2", gap=8.0), sleeper]
    assert (
        keep_room_to_wake(budget_mib=BUDGET, residents=two_hot, wake_need_mib=NEED, busy_gap_s=60.0)
        == ()
    )
    assert holeless(budget_mib=BUDGET, residents=two_hot, wake_need_mib=NEED, busy_gap_s=60.0)
    assert not holeless(
        budget_mib=BUDGET, residents=[idle_busy, idle_cool, sleeper], wake_need_mib=NEED,
        busy_gap_s=60.0,
    )  # fmt: skip


def test_a_sleep_under_way_makes_the_hole_and_a_wake_waits_for_it() -> None:
    hot = res("hot", gap=5.0)
    going = res("going", awake=False, draining=True, free_at=102.0)
    waking = res("w", awake=False)
    # The hole is coming: nothing else is put to sleep for it.
    assert (
        keep_room_to_wake(
            budget_mib=BUDGET, residents=[hot, going, waking], wake_need_mib=NEED, busy_gap_s=60.0
        )
        == ()
    )
    plan = plan_wake(
        budget_mib=BUDGET, residents=[res("idle", gap=600.0), going, waking], waking_pod="w",
        need_mib=NEED, now=100.0, max_wait_s=10.0, evict_s=2.85, busy_gap_s=60.0,
    )  # fmt: skip
    assert (plan.sleep, plan.fits, plan.at_s) == ((), True, 102.0)


def test_a_new_pod_goes_by_the_role_it_will_play() -> None:
    sites = [
        site("hot", res("h", gap=5.0), res("s1", awake=False)),
        site("sleepers", res("s2", awake=False), res("s3", awake=False), use=GpuUse.SLEEPING_ONLY),
        site("lone-hot", res("h2", gap=5.0)),
    ]
    common = {"new_mib": AWAKE, "wake_need_mib": NEED, "busy_gap_s": 60.0}
    # A sleeper-to-be: where no busy model takes a place (room to wake kept).
    chosen = choose_site(sites, **common)
    assert chosen is not None and chosen.device == "sleepers"
    # A busy model: beside another with no sleepers, a pair.
    chosen = choose_site(sites, busy=True, **common)
    assert chosen is not None and chosen.device == "lone-hot"
    assert pair_site(sites, **common) == "lone-hot"
    # Nowhere without putting a busy model to sleep or a likely wake at risk: None.
    full = [site("hot", res("h", gap=5.0), res("s1", awake=False, p_soon=0.5))]
    assert choose_site(full, **common) is None
    assert choose_site(full, max_blocked=0.6, **common) is not None


def test_a_new_pod_takes_room_to_wake_only_from_unlikely_sleepers() -> None:
    residents = [res("h", gap=5.0), res("s", awake=False, p_soon=0.01)]
    common = {"budget_mib": BUDGET, "new_mib": AWAKE, "wake_need_mib": NEED, "busy_gap_s": 60.0}
    assert not place_pod(residents=residents, **common).fits
    plan = place_pod(residents=residents, max_blocked=0.05, **common)
    assert plan.fits and plan.blocked == pytest.approx(0.01)


COSTS = MoveCosts(new_mib=AWAKE, wake_need_mib=NEED, move_cost_s=20.0, busy_gap_s=60.0)


def leaver(name: str, every_s: float = 300.0) -> tuple[Leaver, float]:
    g, now = gaps(every_s)
    return Leaver(pod=name, target=name, gaps=g, host_mib=15_000), now


def test_a_device_of_sleepers_is_emptied_when_moves_cost_less_than_keeping_it() -> None:
    (a, now), (b, _) = leaver("a"), leaver("b")
    sites = [site("one", res("h", gap=600.0)), site("two", res("h2", gap=600.0))]
    plan = plan_emptying([a, b], sites=sites, keep_cost_s=60.0, rungs=RUNGS, now=now, costs=COSTS)
    assert plan is not None and plan.zeros == () and plan.cost_s == 40.0
    assert sorted(plan.moves) == [("a", "one"), ("b", "two")]  # one replacement loading each
    # Kept while it has held only sleepers for less than the moves cost.
    assert (
        plan_emptying([a, b], sites=sites, keep_cost_s=30.0, rungs=RUNGS, now=now, costs=COSTS)
        is None
    )
    # Nowhere to go and no zero: kept.
    assert plan_emptying(
        [a], sites=[], keep_cost_s=1e9, rungs=RUNGS, now=now, costs=COSTS, zero_allowed=False
    ) is None  # fmt: skip


def test_a_sleeper_that_cannot_wake_where_it_is_moves_where_it_can() -> None:
    (a, now) = leaver("a", every_s=120.0)
    holes = site("holes", res("s", awake=False), use=GpuUse.SLEEPING_ONLY)
    moves = plan_rehoming([a], sites=[holes], rungs=RUNGS, now=now, costs=COSTS, stay_back_s=3.75)
    assert moves == (("a", "holes"),)
    # Where a wake would meet the objective anyway, staying costs nothing: no move.
    assert (
        plan_rehoming([a], sites=[holes], rungs=RUNGS, now=now, costs=COSTS, stay_back_s=1.0) == ()
    )
